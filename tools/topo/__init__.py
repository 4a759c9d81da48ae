"""GPU and network topology of a node: NVML, nvidia-smi topo -m, sysfs, PCIe ACS."""
