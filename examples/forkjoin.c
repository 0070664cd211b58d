/* forkjoin: a complete small libcucapture program.  It takes the device's
 * memory pool, captures a graph that allocates a buffer, fills its two
 * halves on two forked streams, joins them, then runs the graph and checks
 * the result.  It is C and C++ alike.  Build it with
 *     cc forkjoin.c $(pkg-config --cflags --libs cucapture)
 *     c++ -x c++ forkjoin.c $(pkg-config --cflags --libs cucapture)
 * or with the Makefile or CMakeLists.txt beside it.
 * Exit status: 0 on success, 77 when no CUDA driver or GPU can be used,
 * 1 on any other failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cucapture.h>
#include <cudaTypedefs.h>

#define HALF 4096

/* the driver calls of our own, reached through the library: no -lcuda */
static PFN_cuMemsetD8Async_v3020 memset_async;
static PFN_cuStreamSynchronize_v2000 stream_synchronize;
static PFN_cuMemcpyDtoHAsync_v3020 copy_to_host;   /* on a stream: no current context needed */

static int report(const char *what, cucap_error *err)
{
    char *text = cucap_error_to_string(err);
    fprintf(stderr, "forkjoin: %s failed: %s: %s\n", what, cucap_error_name(err),
            text ? text : cucap_error_message(err));
    free(text);
    cucap_error_free(err);
    return 1;
}

int main(void)
{
    cucap_builder *b = NULL, *fork = NULL, *both[2];
    cucap_pool *pool = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    CUdeviceptr buf = 0;
    unsigned char host[2 * HALF];
    int status = 1;
    size_t i;

    if (cucap_init(&err) != CUDA_SUCCESS) {
        fprintf(stderr, "forkjoin: no usable CUDA driver: %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return 77;
    }
    memset_async = (PFN_cuMemsetD8Async_v3020)cucap_driver_entry_point("cuMemsetD8Async");
    stream_synchronize = (PFN_cuStreamSynchronize_v2000)cucap_driver_entry_point("cuStreamSynchronize");
    copy_to_host = (PFN_cuMemcpyDtoHAsync_v3020)cucap_driver_entry_point("cuMemcpyDtoHAsync");
    if (!memset_async || !stream_synchronize || !copy_to_host) {
        fprintf(stderr, "forkjoin: the driver lacks an entry point this program needs\n");
        return 1;
    }
    if (cucap_builder_create(0, &b, &err) != CUDA_SUCCESS)
        return report("cucap_builder_create", err);
    if (cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err) != CUDA_SUCCESS) {
        report("cucap_builder_begin", err);
        goto out;
    }
    /* legal inside the global capture: nothing is invalidated */
    if (cucap_device_pool(0, &pool, &err) != CUDA_SUCCESS ||
        cucap_pool_alloc(pool, sizeof host, cucap_builder_stream(b), &buf, &err) != CUDA_SUCCESS ||
        cucap_builder_split(b, 2, &fork, &err) != CUDA_SUCCESS) {
        report("the pool or the split", err);
        goto out;
    }
    if (memset_async(buf, 0x11, HALF, cucap_builder_stream(b)) != CUDA_SUCCESS ||
        memset_async(buf + HALF, 0x22, HALF, cucap_builder_stream(fork)) != CUDA_SUCCESS) {
        fprintf(stderr, "forkjoin: cuMemsetD8Async failed\n");
        goto out;
    }
    both[0] = b;
    both[1] = fork;
    if (cucap_builder_join(both, 2, NULL, &err) != CUDA_SUCCESS ||
        cucap_builder_end(b, &err) != CUDA_SUCCESS ||
        cucap_builder_complete(b, NULL, &exec, &err) != CUDA_SUCCESS ||
        cucap_exec_launch(exec, cucap_builder_stream(b), &err) != CUDA_SUCCESS) {
        report("building or running the graph", err);
        goto out;
    }
    if (copy_to_host(host, buf, sizeof host, cucap_builder_stream(b)) != CUDA_SUCCESS ||
        stream_synchronize(cucap_builder_stream(b)) != CUDA_SUCCESS) {
        fprintf(stderr, "forkjoin: reading the result failed\n");
        goto out;
    }
    for (i = 0; i < sizeof host; i++)
        if (host[i] != (i < HALF ? 0x11 : 0x22)) {
            fprintf(stderr, "forkjoin: byte %zu is %#x\n", i, host[i]);
            goto out;
        }
    if (cucap_pool_free(pool, buf, cucap_builder_stream(b), &err) != CUDA_SUCCESS) {
        report("cucap_pool_free", err);
        goto out;
    }
    stream_synchronize(cucap_builder_stream(b));
    printf("forkjoin: both halves written by one graph of two branches\n");
    status = 0;
out:
    cucap_exec_destroy(exec);
    cucap_builder_destroy(fork);
    cucap_builder_destroy(b);
    return status;
}
