// Linked into every executable that links ndserve_server_lib (an INTERFACE source of it),
// and exported from the executable so that it interposes libc's pthread_attr_setstacksize
// for every shared library.
//
// Why: glibc carves a thread's static TLS out of the stack the thread was given and
// refuses (EINVAL from pthread_create) a stack smaller than that TLS plus a minimum.
// Linking the engine brings OpenBLAS (60 KiB of static TLS) and cuBLAS/cuBLASLt
// (~110 KiB), while civetweb, under prometheus-cpp's /metrics listener, asks for
// 100 KiB stacks: without this, the metrics listener cannot start a single thread and
// the daemon fails with "null context when constructing CivetServer". Every explicit
// stack size is therefore raised by the static TLS of the loaded modules, which gives
// the library the usable stack it asked for.
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <cstddef>

namespace {

using SetStackSizeFn = int (*)(pthread_attr_t*, size_t);

int AddTls(dl_phdr_info* info, size_t /*size*/, void* data) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_TLS) *static_cast<size_t*>(data) += ph.p_memsz + ph.p_align;
  }
  return 0;
}

// Static TLS of every module loaded now (an upper bound: modules loaded with dlopen use
// dynamic TLS), plus room for glibc's own per-thread data.
size_t StaticTlsBytes() {
  size_t total = 16 * 1024;
  dl_iterate_phdr(AddTls, &total);
  return total;
}

}  // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  static const SetStackSizeFn real =
      reinterpret_cast<SetStackSizeFn>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  static const size_t tls = StaticTlsBytes();
  return real(attr, size + tls);
}
