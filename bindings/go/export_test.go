package fleetjit

// KernelOfModuleForTest is a Kernel of m without a lookup (which needs a
// GPU), so the bad-input table can call a kernel of a closed module on the
// CPU: every Kernel method refuses it before its handle is read.
func KernelOfModuleForTest(m *Module) *Kernel { return &Kernel{m: m} }
