/* Prints the size of every struct in <fleetjit/fleetjit.h> and the offset of
 * each field, one "struct field offset" line each ("struct . size" for the
 * size). bindings/python/tests/test_layout.py compares its ctypes mirror
 * with this output, so a header change the binding missed fails a test. */
#include <fleetjit/fleetjit.h>
#include <stddef.h>
#include <stdio.h>

#define SIZE(s) printf("%s . %zu\n", #s, sizeof(s))
#define FIELD(s, f) printf("%s %s %zu\n", #s, #f, offsetof(s, f))

int main(void) {
  SIZE(fj_str);
  FIELD(fj_str, data);
  FIELD(fj_str, size);
  SIZE(fj_copy_plan);
  FIELD(fj_copy_plan, target);
  FIELD(fj_copy_plan, impl);
  FIELD(fj_copy_plan, support);
  SIZE(fj_runtime_options);
  FIELD(fj_runtime_options, libcuda_path);
  FIELD(fj_runtime_options, libnvrtc_path);
  FIELD(fj_runtime_options, target_override);
  FIELD(fj_runtime_options, copy_impl_override);
  FIELD(fj_runtime_options, flags);
  FIELD(fj_runtime_options, cache_dir);
  FIELD(fj_runtime_options, cache_max_bytes);
  SIZE(fj_device_info);
  FIELD(fj_device_info, name);
  FIELD(fj_device_info, ordinal);
  FIELD(fj_device_info, cc_major);
  FIELD(fj_device_info, cc_minor);
  FIELD(fj_device_info, sm_count);
  FIELD(fj_device_info, total_memory_bytes);
  FIELD(fj_device_info, shared_memory_per_block);
  FIELD(fj_device_info, shared_memory_per_block_optin);
  FIELD(fj_device_info, shared_memory_per_sm);
  FIELD(fj_device_info, l2_cache_bytes);
  FIELD(fj_device_info, max_threads_per_block);
  FIELD(fj_device_info, cluster_launch);
  FIELD(fj_device_info, driver_version);
  FIELD(fj_device_info, plan);
  SIZE(fj_build_options);
  FIELD(fj_build_options, source);
  FIELD(fj_build_options, name);
  FIELD(fj_build_options, nvrtc_options);
  FIELD(fj_build_options, num_nvrtc_options);
  FIELD(fj_build_options, name_expressions);
  FIELD(fj_build_options, num_name_expressions);
  FIELD(fj_build_options, target);
  FIELD(fj_build_options, device);
  FIELD(fj_build_options, copy_impl);
  FIELD(fj_build_options, output);
  FIELD(fj_build_options, flags);
  SIZE(fj_module_info);
  FIELD(fj_module_info, target);
  FIELD(fj_module_info, copy_impl);
  FIELD(fj_module_info, output);
  FIELD(fj_module_info, cache_result);
  FIELD(fj_module_info, build_ms);
  FIELD(fj_module_info, compile_ms);
  FIELD(fj_module_info, image_bytes);
  SIZE(fj_dl_device);
  SIZE(fj_dl_dtype);
  SIZE(fj_tensor);
  FIELD(fj_tensor, data);
  FIELD(fj_tensor, device);
  FIELD(fj_tensor, ndim);
  FIELD(fj_tensor, dtype);
  FIELD(fj_tensor, shape);
  FIELD(fj_tensor, strides);
  FIELD(fj_tensor, byte_offset);
  SIZE(fj_tensor_arg);
  FIELD(fj_tensor_arg, tensor);
  FIELD(fj_tensor_arg, box);
  FIELD(fj_tensor_arg, oob);
  FIELD(fj_tensor_arg, swizzle);
  SIZE(fj_tensor_check);
  FIELD(fj_tensor_check, tma);
  FIELD(fj_tensor_check, reason);
  SIZE(fj_arg);
  FIELD(fj_arg, kind);
  FIELD(fj_arg, size);
  FIELD(fj_arg, v);
  SIZE(fj_launch_config);
  FIELD(fj_launch_config, grid);
  FIELD(fj_launch_config, block);
  FIELD(fj_launch_config, shared_bytes);
  FIELD(fj_launch_config, cluster);
  FIELD(fj_launch_config, stream);
  SIZE(fj_kernel_info);
  FIELD(fj_kernel_info, lowered_name);
  FIELD(fj_kernel_info, num_params);
  FIELD(fj_kernel_info, param_bytes);
  FIELD(fj_kernel_info, max_threads_per_block);
  FIELD(fj_kernel_info, static_shared_bytes);
  FIELD(fj_kernel_info, num_regs);
  FIELD(fj_kernel_info, uses_thunk);
  SIZE(fj_cache_stats);
  FIELD(fj_cache_stats, memory_hits);
  FIELD(fj_cache_stats, disk_hits);
  FIELD(fj_cache_stats, misses);
  FIELD(fj_cache_stats, compiles);
  FIELD(fj_cache_stats, compile_ms_total);
  FIELD(fj_cache_stats, evictions);
  FIELD(fj_cache_stats, rejected_entries);
  FIELD(fj_cache_stats, disk_entries);
  FIELD(fj_cache_stats, disk_bytes);
  /* Since 1.3: device linking. */
  SIZE(fj_link_input);
  FIELD(fj_link_input, struct_size);
  FIELD(fj_link_input, ext);
  FIELD(fj_link_input, kind);
  FIELD(fj_link_input, name);
  FIELD(fj_link_input, data);
  FIELD(fj_link_input, size);
  FIELD(fj_link_input, nvrtc_options);
  FIELD(fj_link_input, num_nvrtc_options);
  FIELD(fj_link_input, name_expressions);
  FIELD(fj_link_input, num_name_expressions);
  SIZE(fj_link_options);
  FIELD(fj_link_options, struct_size);
  FIELD(fj_link_options, ext);
  FIELD(fj_link_options, inputs);
  FIELD(fj_link_options, num_inputs);
  FIELD(fj_link_options, name);
  FIELD(fj_link_options, target);
  FIELD(fj_link_options, device);
  FIELD(fj_link_options, link_options);
  FIELD(fj_link_options, num_link_options);
  FIELD(fj_link_options, include_dirs);
  FIELD(fj_link_options, num_include_dirs);
  FIELD(fj_link_options, flags);
  return 0;
}
