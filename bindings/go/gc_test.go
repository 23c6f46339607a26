package fleetjit_test

import "runtime"

func runtimeGC() { runtime.GC() }
