package fleetjit

/*
#include <stdlib.h>
#include <string.h>
#include <fleetjit/fleetjit.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// LinkInput mirrors fj_link_input: a source or a prebuilt object.
type LinkInput struct {
	Kind LinkInputKind
	Name string // for messages; "" = "input<index>"
	Data []byte // the source text or the object's bytes
	// Sources only: extra NVRTC options and C++ kernel names.
	NVRTCOptions    []string
	NameExpressions []string
}

// LinkOptions mirrors fj_link_options.
type LinkOptions struct {
	Inputs []LinkInput
	Name   string // for logs; "" = "link"
	// "sm_XX[a]"; "" = the runtime's override, else the live device Device.
	Target      string
	Device      int
	LinkOptions []string // extra nvJitLink options ("-O3")
	IncludeDirs []string // searched by every source for #include
	LTO         bool     // sources as LTO-IR, nvJitLink -lto
	Devrt       bool     // link libcudadevrt (dynamic parallelism)
	NoCache     bool     // neither read nor write any cache tier
}

func init() { detailKeys = append(detailKeys, "link_log") }

// Link links opts.Inputs into one module with nvJitLink (or fetches it from
// the cache), used like a built Module. A link error is a BuildError whose
// Details["link_log"] (and BuildLog) is nvJitLink's log; a host without
// nvJitLink gets Unavailable naming the library and where it looked.
func (r *Runtime) Link(opts *LinkOptions) (*Module, error) {
	var h *C.fj_module
	if err := withOptions(r, opts, "LinkOptions", func(m *cmem) error {
		o, err := opts.toC(m)
		if err != nil {
			return err
		}
		return statusErr(C.fj_module_link(r.h, &o, &h))
	}); err != nil {
		return nil, err
	}
	return newModule(r, h), nil
}

// check refuses an embedded NUL in any string of opts, as Build does
// (nvJitLink, NVRTC and the driver read C strings), naming the field. A
// source's bytes are the library's to check (it names the input).
func (opts *LinkOptions) check() error {
	for _, c := range []struct{ what, s string }{
		{"the link name", opts.Name}, {"the target", opts.Target},
	} {
		if err := noNUL(c.what, c.s); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		what string
		ss   []string
	}{{"a link option", opts.LinkOptions}, {"an include folder", opts.IncludeDirs}} {
		for _, s := range c.ss {
			if err := noNUL(c.what, s); err != nil {
				return err
			}
		}
	}
	for i, in := range opts.Inputs {
		if err := noNUL(fmt.Sprintf("the name of input %d", i), in.Name); err != nil {
			return err
		}
		for _, c := range []struct {
			what string
			ss   []string
		}{{"an NVRTC option", in.NVRTCOptions}, {"a name expression", in.NameExpressions}} {
			for _, s := range c.ss {
				if err := noNUL(fmt.Sprintf("%s of input %d", c.what, i), s); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// toC fills an fj_link_options whose inputs and strings live in m, after
// check.
func (opts *LinkOptions) toC(m *cmem) (C.fj_link_options, error) {
	var o C.fj_link_options
	if err := opts.check(); err != nil {
		return o, err
	}
	device, err := ordinalOf(opts.Device)
	if err != nil {
		return o, err
	}
	o.struct_size = C.size_t(unsafe.Sizeof(o))
	if n := len(opts.Inputs); n > 0 {
		size := C.size_t(unsafe.Sizeof(C.fj_link_input{}))
		p := C.calloc(C.size_t(n), size)
		m.ptrs = append(m.ptrs, p)
		arr := unsafe.Slice((*C.fj_link_input)(p), n)
		for i, in := range opts.Inputs {
			e := &arr[i]
			e.struct_size = size
			e.kind = C.fj_link_input_kind(in.Kind)
			e.name = m.str(in.Name)
			if len(in.Data) > 0 {
				e.data = m.bytes(in.Data)
			}
			e.size = C.size_t(len(in.Data))
			e.nvrtc_options, e.num_nvrtc_options = m.strs(in.NVRTCOptions)
			e.name_expressions, e.num_name_expressions = m.strs(in.NameExpressions)
		}
		o.inputs = (*C.fj_link_input)(p)
		o.num_inputs = C.size_t(n)
	}
	o.name = m.str(opts.Name)
	o.target = m.str(opts.Target)
	o.device = device
	o.link_options, o.num_link_options = m.strs(opts.LinkOptions)
	o.include_dirs, o.num_include_dirs = m.strs(opts.IncludeDirs)
	if opts.NoCache {
		o.flags |= C.FJ_LINK_NO_CACHE
	}
	if opts.LTO {
		o.flags |= C.FJ_LINK_LTO
	}
	if opts.Devrt {
		o.flags |= C.FJ_LINK_DEVRT
	}
	return o, nil
}
