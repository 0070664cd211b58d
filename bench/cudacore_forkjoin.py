#!/usr/bin/env python3
"""The fork/join capture cycle of `cucapture bench` through cuda.core's
GraphBuilder, for the third column of bench/RESULTS.md: begin, split K,
one memset per branch, join, end, complete, launch, synchronize, close.
Prints one line per K: "cuda.core K=<k>: <median microseconds>", or why
it could not run."""
import statistics
import sys
import time

KS = (2, 8, 64)
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 201

try:
    from cuda.core import Device
    from cuda.bindings import driver
except ImportError:
    try:
        from cuda.core.experimental import Device
        from cuda.bindings import driver
    except ImportError as e:
        print("cuda.core: not available:", e)
        sys.exit(0)


def check(result):
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise RuntimeError("driver error %d" % int(err))


def main():
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    buf = dev.allocate(64 * max(KS), stream=stream)
    stream.sync()
    ptr = int(buf.handle)
    try:
        import cuda.core
        version = getattr(cuda.core, "__version__", "?")
    except Exception:
        version = "?"
    print("cuda.core %s" % version)
    for k in KS:
        times = []
        for rep in range(REPS + 10):
            t0 = time.perf_counter()
            b = dev.create_graph_builder().begin_building("global")
            branches = b.split(k)
            for i, br in enumerate(branches):
                check(driver.cuMemsetD8Async(ptr + 64 * i, i, 64, int(br.stream.handle)))
            joined = type(b).join(*branches)
            joined.end_building()
            g = joined.complete()
            g.launch(stream)
            stream.sync()
            g.close()
            joined.close()
            elapsed = (time.perf_counter() - t0) * 1e6
            if rep >= 10:
                times.append(elapsed)
        print("cuda.core K=%d: %.3f" % (k, statistics.median(times)))
        sys.stdout.flush()


try:
    main()
except Exception as e:  # report, never fail the run that records the table
    print("cuda.core: could not run the cycle: %s: %s" % (type(e).__name__, e))
