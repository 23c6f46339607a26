// placeholder replaced by the C shim
