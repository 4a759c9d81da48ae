"""ncclbot's one Xid catalogue: what each code means, how severe it is, which rule (and card)
it maps to and whether it points at the hardware or at the application. The node tool
(`tools.xid.scan`) and the log rules (`bot.diagnosis.rules.hardware_rule`) both read it.

Source: NVIDIA's Xid catalogue for Ampere and newer GPUs,
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html ("Table 1 Xids"). Each
entry quotes that table's mnemonic, its description and its "Resolution Bucket (Immediate
Action)" (`nvidia_action`); `cause` is ncclbot's reading of them, noted where it is not plain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tools.result import Severity

XID_CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

#: An `NVRM: Xid` kernel-log line: groups (1) the GPU's PCI address, (2) the code, (3) the rest.
#: Newer drivers print "NVRM: Xid (PCI:0000:02:00): 79, ..." (tests/fixtures/dmesg); NVIDIA's
#: Xid document shows the older "NVRM: Xid (0000:03:00): 14, Channel 00000001".
XID_LINE = r"NVRM: Xid \((?:PCI:)?([^)]*)\): (\d+),?\s*(.*)$"

#: What an Xid points at: the GPU/its links/firmware, or (usually) the application.
Cause = Literal["hardware", "application"]


@dataclass(frozen=True)
class XidInfo:
    """One catalogue entry. `mnemonic` and `nvidia_action` are NVIDIA's, verbatim."""

    code: int
    mnemonic: str
    name: str
    severity: Severity
    rule: str
    cause: Cause | None
    nvidia_action: str
    action: str


_APP = "xid_app_fault"
_ECC = "xid_ecc"
_REMAP = "xid_row_remap"
_NVL = "xid_nvlink"
_BUS = "xid_gpu_fell_off_bus"
_FW = "xid_gpu_firmware"
_OTHER = "xid_other"
_HW: Cause = "hardware"
_USER: Cause = "application"


def _nvlink5(code: int, unit: str) -> XidInfo:
    return XidInfo(code, f"NVLINK_{unit}_ERROR", f"NVLINK: {unit} Error", "error", _NVL, _HW,
                   "WORKFLOW_NVLINK5_ERR", "NVLink fault; check fabric manager")


XIDS: dict[int, XidInfo] = {x.code: x for x in (
    # Application faults: NVIDIA's immediate action is RESTART_APP (or IGNORE for 43/45).
    XidInfo(8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "warn",
            _APP, _USER, "RESTART_APP",
            "usually a hung kernel in the application; reset if it repeats"),
    XidInfo(13, "ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception", "warn", _APP, _USER,
            "RESTART_APP",
            "usually an application bug (out-of-range access); check the failing process"),
    XidInfo(31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "warn", _APP,
            _USER, "RESTART_APP",
            "usually an illegal address in the application; repeated on many jobs: hardware"),
    XidInfo(43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", "warn",
            _APP, _USER, "IGNORE", "a user application faulted; the GPU stays healthy"),
    # NVIDIA: "logged when the user application aborts and the kernel driver tears down the
    # GPU application"; it follows another Xid (or a kill), which is the one to read.
    XidInfo(45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors",
            "info", _APP, _USER, "WORKFLOW_XID_45",
            "follows a killed process or an earlier Xid; look at the Xid before it"),
    XidInfo(68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "warn", _APP, _USER,
            "RESTART_APP", "a video-decoder fault in the application; restart it"),
    XidInfo(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "warn", _APP,
            _USER, "RESTART_APP", "usually an application error"),
    # NVIDIA's immediate action is RESET_GPU; ncclbot keeps it an application fault because
    # the real capture in tests/fixtures/dmesg/xid13-xid109-sm-exception.log shows it after an
    # application's illegal instruction (Xid 13). A 109 on its own repeats: reset the GPU.
    XidInfo(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", "warn",
            _APP, _USER, "RESET_GPU", "application or driver timeout; reset if it repeats"),
    # Hardware, links, firmware.
    # NVIDIA: "These failures primarily involve quality issues on PCI, and are generally not
    # caused by user application actions."
    XidInfo(32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", "warn",
            _OTHER, _HW, "RESTART_APP",
            "corruption on the way to the GPU, mostly PCIe quality; check PCIe AER errors"),
    XidInfo(38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "error",
            _FW, _HW, "IGNORE", "update the driver; reset the GPU"),
    XidInfo(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "error", _OTHER,
            _HW, "RESET_GPU", "the GPU stopped answering: reset it"),
    XidInfo(48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "error", _ECC, _HW,
            "WORKFLOW_XID_48",
            "uncorrectable memory error: drain, reset the GPU; RMA if it recurs"),
    # Not in NVIDIA's Ampere+ table any more ("Unused"); kept for older GPUs and drivers.
    XidInfo(61, "PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning", "error", _FW,
            _HW, "CONTACT_SUPPORT", "reset the GPU; report with nvidia-bug-report.sh"),
    XidInfo(62, "PMU_HALT_ERROR", "Internal micro-controller halt", "error", _FW, _HW,
            "RESET_GPU", "reset the GPU; report with nvidia-bug-report.sh"),
    XidInfo(63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "warn", _REMAP,
            _HW, "IGNORE", "a memory page/row was retired; reset the GPU to apply it"),
    XidInfo(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "error",
            _REMAP, _HW, "RESET_GPU",
            "retirement could not be recorded: drain the node, RMA likely"),
    XidInfo(74, "NVLINK_ERROR", "NVLINK Error", "error", _NVL, _HW, "WORKFLOW_NVLINK_ERR",
            "NVLink fault: check `nvidia-smi nvlink -e`, reset GPUs; hardware if it recurs"),
    XidInfo(79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus",
            "error", _BUS, _HW, "RESTART_BM",
            "the GPU is gone from PCIe: drain the node; check power, thermals, seating, SBIOS"),
    XidInfo(92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "warn", _ECC, _HW,
            "IGNORE", "memory degrading; watch for row remapping, plan a replacement"),
    # NVIDIA: contained to one application ("reset the GPU when convenient"); "One possible
    # cause of containment errors is the handling of ECC memory errors."
    XidInfo(94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "error", _ECC, _HW,
            "RESTART_APP", "only the affected application was killed; reset the GPU when idle"),
    XidInfo(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", "error", _ECC,
            _HW, "RESET_GPU",
            "all applications on the GPU are affected: drain and reset the GPU"),
    XidInfo(119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", "error", _FW, _HW, "RESET_GPU",
            "GSP firmware stopped answering: reset the GPU/reboot; update the driver"),
    XidInfo(120, "GSP_ERROR", "GSP Error", "error", _FW, _HW, "RESET_GPU",
            "reset the GPU/reboot; update the driver"),
    # NVIDIA: "corrected errors on the C2C NVLink connection to a Grace CPU".
    XidInfo(121, "C2C_ERROR", "C2C Error", "warn", _NVL, _HW, "IGNORE",
            "corrected C2C link errors; reset the GPU in a service window to retrain the link"),
    XidInfo(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "error", _ECC, _HW,
            "RESET_GPU", "uncorrectable memory error the driver could not remap: reset the GPU; "
            "RMA if it persists"),
    _nvlink5(144, "SAW"),
    _nvlink5(145, "RLW"),
    _nvlink5(146, "TLW"),
    _nvlink5(147, "TREX"),
    _nvlink5(148, "NVLPW_CTRL"),
    _nvlink5(149, "NETIR"),
    _nvlink5(150, "MSE"),
    # NVIDIA: "seen in conjunction with other Xids and summarizes the recovery action required
    # for other Xids" (None, Drain P2P, Drain and Reset, GPU Reset Required, Node Reboot
    # Required): the GPU itself needs recovering.
    XidInfo(154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", "warn", _OTHER,
            _HW, "XID_154", "read the recommended recovery action (reset, reboot, drain)"),
)}


def explain(code: int) -> XidInfo:
    """The catalogue entry, or a generic one (cause unknown) for codes not in the table."""
    return XIDS.get(code) or XidInfo(code, "", "Xid not in ncclbot's table", "warn", _OTHER,
                                     None, "", f"look it up in {XID_CATALOG_URL}")


def xid_cause(code: int) -> Cause | None:
    """Whether an Xid points at the hardware or the application; None when not catalogued."""
    return explain(code).cause
