"""Facts about devices that need no device: datasheet peaks, and which TPU a name or a host is."""
