// forkjoin.cpp: the forkjoin example in C++ with <cucapture.hpp>.  It
// takes the device's memory pool, captures a graph that allocates a
// buffer, fills its two halves on two forked streams, joins them, runs
// the graph and checks the result.  Every object cleans up after itself,
// also when a call throws.  Build it with
//     c++ -std=c++17 forkjoin.cpp $(pkg-config --cflags --libs cucapture)
// Exit status: 0 on success, 77 when no CUDA driver or GPU can be used,
// 1 on any other failure.
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <vector>

#include <cucapture.hpp>
#include <cudaTypedefs.h>

int main()
{
    const std::size_t half = 4096;

    try {
        cucap::init();
    } catch (const cucap::error &e) {
        std::fprintf(stderr, "forkjoin: no usable CUDA driver: %s\n", e.what());
        return 77;
    }
    // the driver calls of our own, reached through the library: no -lcuda
    auto memset_async = reinterpret_cast<PFN_cuMemsetD8Async_v3020>(cucap::driver_entry_point("cuMemsetD8Async"));
    auto copy_to_host = reinterpret_cast<PFN_cuMemcpyDtoHAsync_v3020>(cucap::driver_entry_point("cuMemcpyDtoHAsync"));
    auto synchronize = reinterpret_cast<PFN_cuStreamSynchronize_v2000>(cucap::driver_entry_point("cuStreamSynchronize"));
    if (!memset_async || !copy_to_host || !synchronize) {
        std::fprintf(stderr, "forkjoin: the driver lacks an entry point this program needs\n");
        return 1;
    }
    try {
        cucap::builder b = cucap::builder::create(0);
        cucap::pool pool = cucap::pool::device(0);
        std::vector<unsigned char> host(2 * half);

        b.begin(CU_STREAM_CAPTURE_MODE_GLOBAL);
        CUdeviceptr buf = pool.alloc(host.size(), b.stream());   // legal inside the global capture
        std::vector<cucap::builder> forks = b.split(2);
        if (memset_async(buf, 0x11, half, b.stream()) != CUDA_SUCCESS ||
            memset_async(buf + half, 0x22, half, forks[0].stream()) != CUDA_SUCCESS)
            throw std::runtime_error("cuMemsetD8Async failed");
        cucap::join({std::ref(b), std::ref(forks[0])});
        b.end();
        cucap::exec graph = b.complete();
        graph.launch(b.stream());
        if (copy_to_host(host.data(), buf, host.size(), b.stream()) != CUDA_SUCCESS ||
            synchronize(b.stream()) != CUDA_SUCCESS)
            throw std::runtime_error("reading the result failed");
        for (std::size_t i = 0; i < host.size(); i++)
            if (host[i] != (i < half ? 0x11 : 0x22)) {
                std::fprintf(stderr, "forkjoin: byte %zu is %#x\n", i, host[i]);
                return 1;
            }
        pool.free(buf, b.stream());
        synchronize(b.stream());
        std::printf("forkjoin (C++): both halves written by one graph of two branches\n");
        return 0;
    } catch (const cucap::error &e) {
        std::fprintf(stderr, "forkjoin: %s: %s\n", e.name(), e.text().c_str());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "forkjoin: %s\n", e.what());
    }
    return 1;
}
