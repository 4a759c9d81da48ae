"""NVIDIA Xid errors in kernel logs, explained."""
