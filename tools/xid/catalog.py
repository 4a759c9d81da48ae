"""What each NVIDIA Xid code means, in short, with severity and the rule it maps to.

Source: NVIDIA's Xid catalog, https://docs.nvidia.com/deploy/xid-errors/index.html
(and its analyzer notes); NVLink codes 144-150 per the same catalog for Blackwell.
"""

from __future__ import annotations

from dataclasses import dataclass

from tools.result import Severity

XID_CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/index.html"


@dataclass(frozen=True)
class XidInfo:
    code: int
    name: str
    severity: Severity
    rule: str
    action: str


_APP = "xid_app_fault"
_ECC = "xid_ecc"
_REMAP = "xid_row_remap"
_NVL = "xid_nvlink"
_BUS = "xid_gpu_fell_off_bus"
_FW = "xid_gpu_firmware"
_OTHER = "xid_other"

XIDS: dict[int, XidInfo] = {x.code: x for x in (
    XidInfo(8, "GPU stopped processing (timeout)", "warn", _APP,
            "usually a hung kernel in the application; reset if it repeats"),
    XidInfo(13, "Graphics engine exception", "warn", _APP,
            "usually an application bug (out-of-range access); check the failing process"),
    XidInfo(31, "GPU memory page fault (MMU fault)", "warn", _APP,
            "usually an illegal address in the application; repeated on many jobs: hardware"),
    XidInfo(32, "Invalid or corrupted push buffer stream", "warn", _APP,
            "driver/application or PCIe corruption; check PCIe errors if it repeats"),
    XidInfo(38, "Driver firmware error", "error", _FW, "update the driver; reset the GPU"),
    XidInfo(43, "GPU stopped processing (channel reset)", "warn", _APP,
            "a user application faulted; the GPU stays healthy"),
    XidInfo(45, "Preemptive cleanup, due to previous errors", "info", _APP,
            "follows a killed process or an earlier Xid; look at the Xid before it"),
    XidInfo(48, "Double-bit ECC error (DBE)", "error", _ECC,
            "uncorrectable memory error: drain, reset the GPU; RMA if it recurs"),
    XidInfo(61, "Internal micro-controller breakpoint/warning", "error", _FW,
            "reset the GPU; report with nvidia-bug-report.sh"),
    XidInfo(62, "Internal micro-controller halt", "error", _FW,
            "reset the GPU; report with nvidia-bug-report.sh"),
    XidInfo(63, "ECC page retirement or row-remapping recording event", "warn", _REMAP,
            "a memory page/row was retired; reset the GPU to apply it"),
    XidInfo(64, "ECC page retirement or row-remapping recording failure", "error", _REMAP,
            "retirement could not be recorded: drain the node, RMA likely"),
    XidInfo(69, "Graphics engine class error", "warn", _APP, "usually an application error"),
    XidInfo(74, "NVLink error", "error", _NVL,
            "NVLink fault: check `nvidia-smi nvlink -e`, reset GPUs; hardware if it recurs"),
    XidInfo(79, "GPU has fallen off the bus", "error", _BUS,
            "the GPU is gone from PCIe: drain the node; check power, thermals, seating, SBIOS"),
    XidInfo(92, "High single-bit ECC error rate", "warn", _ECC,
            "memory degrading; watch for row remapping, plan a replacement"),
    XidInfo(94, "Contained ECC error", "error", _ECC,
            "only the affected application was killed; reset the GPU when idle"),
    XidInfo(95, "Uncontained ECC error", "error", _ECC,
            "all applications on the GPU are affected: drain and reset the GPU"),
    XidInfo(109, "Context switch timeout", "warn", _APP,
            "application or driver timeout; reset if it repeats"),
    XidInfo(119, "GSP RPC timeout", "error", _FW,
            "GSP firmware stopped answering: reset the GPU/reboot; update the driver"),
    XidInfo(120, "GSP error", "error", _FW, "reset the GPU/reboot; update the driver"),
    XidInfo(121, "C2C (chip-to-chip) link error", "error", _NVL, "reset; hardware if repeated"),
    XidInfo(144, "NVLink SAW error", "error", _NVL, "NVLink fault; check fabric manager"),
    XidInfo(145, "NVLink RLW error", "error", _NVL, "NVLink fault; check fabric manager"),
    XidInfo(146, "NVLink TLW error", "error", _NVL, "NVLink fault; check fabric manager"),
    XidInfo(147, "NVLink TREX error", "error", _NVL, "NVLink fault; check fabric manager"),
    XidInfo(148, "NVLink NVLPW_CTRL error", "error", _NVL, "NVLink fault; check fabric manager"),
    XidInfo(149, "NVLink NETIR error", "error", _NVL, "NVLink fault; check fabric manager"),
    XidInfo(150, "NVLink MSE error", "error", _NVL, "NVLink fault; check fabric manager"),
    XidInfo(154, "GPU recovery action changed", "warn", _OTHER,
            "read the recommended recovery action (reset, reboot, drain)"),
)}


def explain(code: int) -> XidInfo:
    """The catalog entry, or a generic one for codes not in the table."""
    return XIDS.get(code) or XidInfo(code, "Xid not in ncclbot's table", "warn", _OTHER,
                                     f"look it up in {XID_CATALOG_URL}")
