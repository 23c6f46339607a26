package fleetjit

// The log callback (since 1.1): fj_runtime_options.log_fn is fjgoLog, an
// exported Go function; log_user is one byte of C memory whose address is
// the registry key of the runtime's Go callback (C may not keep a Go
// pointer), looked up on every line.

/*
#include <stdlib.h>
#include <fleetjit/fleetjit.h>
extern void fjgoLog(void* user, int32_t level, fj_str message);
*/
import "C"

import (
	"sync"
	"unsafe"
)

func (l LogLevel) String() string {
	switch l {
	case LogOff:
		return "off"
	case LogError:
		return "error"
	case LogWarn:
		return "warn"
	case LogInfo:
		return "info"
	case LogDebug:
		return "debug"
	}
	return "unknown"
}

var logFuncs sync.Map // C key address -> func(LogLevel, string)

// registerLog returns the C key of f (freed by unregisterLog).
func registerLog(f func(LogLevel, string)) unsafe.Pointer {
	key := C.malloc(1)
	logFuncs.Store(uintptr(key), f)
	return key
}

func unregisterLog(key unsafe.Pointer) {
	if key != nil {
		logFuncs.Delete(uintptr(key))
		C.free(key)
	}
}

func setLogOptions(o *C.fj_runtime_options, key unsafe.Pointer, level LogLevel) {
	o.log_fn = (*[0]byte)(C.fjgoLog)
	o.log_user = key
	o.log_level = C.int32_t(level)
}

//export fjgoLog
func fjgoLog(user unsafe.Pointer, level C.int32_t, message C.fj_str) {
	f, ok := logFuncs.Load(uintptr(user))
	if !ok {
		return
	}
	line := C.GoStringN(message.data, C.int(message.size))
	defer func() { _ = recover() }() // a panicking callback must not unwind into C
	f.(func(LogLevel, string))(LogLevel(level), line)
}
