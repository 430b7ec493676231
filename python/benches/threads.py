"""How much faster two threads run a scenario than one, from Python (the GIL is
released for the native run). A benchmark, not a test: the ratio depends on how busy
the machine is (1.07x at load 3.9 against 1.89x idle on the same 2-core machine).

    python3 python/benches/threads.py [SCENARIO] [REPLICAS]

prints the best of three for 1 and 2 threads and their ratio. Needs the package
installed (pip install ./python, or a wheel).
"""

import sys
import time

import stampede


def best(scenario: str, replicas: int, threads: int) -> float:
    times = []
    for _ in range(3):
        started = time.perf_counter()
        stampede.run(scenario, replicas=replicas, threads=threads, report=False, progress=False)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    scenario = sys.argv[1] if len(sys.argv) > 1 else "mmc"
    replicas = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    stampede.run(scenario, replicas=10, progress=False)  # warm
    one, two = best(scenario, replicas, 1), best(scenario, replicas, 2)
    print(f"{scenario}, {replicas} replicas: 1 thread {one:.2f} s, 2 threads {two:.2f} s: {one / two:.2f}x")


if __name__ == "__main__":
    main()
