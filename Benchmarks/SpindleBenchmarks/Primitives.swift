import Benchmark
import Dispatch
import Foundation
import Glibc
import Spindle
import Synchronization

/// Signalling between two threads, and locks with and without contention.
func registerPrimitiveBenchmarks() {
    let config = scenario(iterations: 5)

    // Ping-pong: two threads hand a token back and forth through two semaphores.
    let pings = 20_000
    Benchmark("semaphore ping-pong ×\(pings): Spindle", configuration: config) { benchmark in
        let ping = try! SpindleSemaphore(value: 0)
        let pong = try! SpindleSemaphore(value: 0)
        let peer = try! SpindleThread.spawnJoinable(name: "pong") {
            for _ in 0..<pings {
                ping.wait()
                pong.signal()
            }
        }
        benchmark.startMeasurement()
        for _ in 0..<pings {
            ping.signal()
            pong.wait()
        }
        benchmark.stopMeasurement()
        try! peer.join()
    }
    Benchmark("semaphore ping-pong ×\(pings): DispatchSemaphore", configuration: config) { benchmark in
        let ping = DispatchSemaphore(value: 0)
        let pong = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            for _ in 0..<pings {
                ping.wait()
                pong.signal()
            }
            done.signal()
        }
        benchmark.startMeasurement()
        for _ in 0..<pings {
            ping.signal()
            pong.wait()
        }
        benchmark.stopMeasurement()
        done.wait()
    }
    Benchmark("semaphore ping-pong ×\(pings): raw POSIX sem_t", configuration: config) { benchmark in
        let ping = PosixSemaphore()
        let pong = PosixSemaphore()
        let done = PosixSemaphore()
        detachRawPthread {
            for _ in 0..<pings {
                ping.wait()
                pong.signal()
            }
            done.signal()
        }
        benchmark.startMeasurement()
        for _ in 0..<pings {
            ping.signal()
            pong.wait()
        }
        benchmark.stopMeasurement()
        done.wait()
    }

    // Uncontended lock + unlock on one thread.
    let pairs = 10_000_000
    Benchmark("uncontended lock+unlock ×\(pairs): Spindle SpindleMutex", configuration: config) { benchmark in
        let mutex = SpindleMutex()
        var n = 0
        benchmark.startMeasurement()
        for _ in 0..<pairs {
            mutex.lock()
            n &+= 1
            mutex.unlock()
        }
        benchmark.stopMeasurement()
        blackHole(n)
    }
    Benchmark("uncontended lock+unlock ×\(pairs): raw pthread_mutex", configuration: config) { benchmark in
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        var n = 0
        benchmark.startMeasurement()
        for _ in 0..<pairs {
            pthread_mutex_lock(mutex)
            n &+= 1
            pthread_mutex_unlock(mutex)
        }
        benchmark.stopMeasurement()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        blackHole(n)
    }
    Benchmark("uncontended lock+unlock ×\(pairs): Foundation NSLock", configuration: config) { benchmark in
        let lock = NSLock()
        var n = 0
        benchmark.startMeasurement()
        for _ in 0..<pairs {
            lock.lock()
            n &+= 1
            lock.unlock()
        }
        benchmark.stopMeasurement()
        blackHole(n)
    }

    // Contended: every CPU's thread increments one shared counter under the lock.
    let perThread = 1_000_000
    Benchmark("contended lock (all CPUs) ×\(perThread * processorCount): Spindle SpindleMutex", configuration: config) {
        benchmark in
        let mutex = SpindleMutex()
        let counter = SharedCounter()
        benchmark.startMeasurement()
        let threads = (0..<processorCount).map { i in
            try! SpindleThread.spawnJoinable(name: "contend\(i)") {
                for _ in 0..<perThread {
                    mutex.lock()
                    counter.value &+= 1
                    mutex.unlock()
                }
            }
        }
        for thread in threads { try! thread.join() }
        benchmark.stopMeasurement()
        blackHole(counter.value)
    }
    Benchmark("contended lock (all CPUs) ×\(perThread * processorCount): Foundation NSLock", configuration: config) {
        benchmark in
        let lock = NSLock()
        let counter = SharedCounter()
        benchmark.startMeasurement()
        let threads = (0..<processorCount).map { i in
            try! SpindleThread.spawnJoinable(name: "contend\(i)") {
                for _ in 0..<perThread {
                    lock.lock()
                    counter.value &+= 1
                    lock.unlock()
                }
            }
        }
        for thread in threads { try! thread.join() }
        benchmark.stopMeasurement()
        blackHole(counter.value)
    }
}

final class SharedCounter: @unchecked Sendable {
    var value = 0
}
