// Development tool behind Scripts/simulate-fleet (not shipped): what the origin of a
// catalog's files sees when a fleet of devices prefetches. N devices wake at the same
// scheduled time, each delayed by a uniform random 0…D seconds (systemd's
// RandomizedDelaySec, or prefetch --jitter), then each fetches a model of S bytes in R
// requests at B bytes a second. Prints the peak and mean requests per second and bytes per
// second over one-second bins. Deterministic: the same seed gives the same table.
//
//   simulate-fleet [--seed N] [--size BYTES] [--requests R] [--bandwidth BYTES_PER_S]
//                  [--devices N,N,...] [--delays S,S,...]
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}

struct Load {
    var peakRequests = 0.0, peakBytes = 0.0
    /// The closed form's plateau (0 when the delay is shorter than one download).
    var meanRequests = 0.0, meanBytes = 0.0
}

/// One simulation: per-second bins of request starts and bytes in flight.
func simulate(devices: Int, delay: Double, size: Double, requests: Int, bandwidth: Double, seed: UInt64) -> Load {
    var rng = SplitMix64(state: seed)
    let duration = size / bandwidth
    let span = Int((delay + duration).rounded(.up)) + 2
    var starts = [Double](repeating: 0, count: span)
    // Bytes: each device adds what it receives in every second it is downloading.
    var bytes = [Double](repeating: 0, count: span)
    for _ in 0..<devices {
        let t = delay > 0 ? rng.unit() * delay : 0
        // The requests of one device follow one another over its download.
        for k in 0..<requests {
            let at = t + duration * Double(k) / Double(requests)
            starts[min(span - 1, Int(at))] += 1
        }
        let end = t + duration
        var second = Int(t)
        while Double(second) < end {
            let from = max(t, Double(second)), to = min(end, Double(second + 1))
            bytes[second] += (to - from) * bandwidth
            second += 1
            if second >= span { break }
        }
    }
    var load = Load()
    load.peakRequests = starts.max() ?? 0
    load.peakBytes = bytes.max() ?? 0
    // The closed form for a uniform spread: while every device's download can be under way
    // (delay ≥ download time), requests arrive at N·R/D a second and bytes at N·S/D.
    if delay >= duration && delay > 0 {
        load.meanRequests = Double(devices * requests) / delay
        load.meanBytes = Double(devices) * size / delay
    }
    return load
}

func human(_ bytesPerSecond: Double) -> String {
    let units = ["B/s", "KB/s", "MB/s", "GB/s", "TB/s", "PB/s"]
    var v = bytesPerSecond, u = 0
    while v >= 1000 && u < units.count - 1 { v /= 1000; u += 1 }
    return (v >= 100 ? String(Int(v.rounded())) : String(Double(Int(v * 10)) / 10)) + " " + units[u]
}

func number(_ n: Double) -> String {
    let digits = String(Int(n.rounded()))
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
        out.append(c)
    }
    return out
}

var seed: UInt64 = 1
var size = 1_300_000_000.0      // local-qwen3-1.7b's download
var requests = 5
var bandwidth = 6_250_000.0     // 50 Mbit/s a device
var fleet = [10_000, 100_000, 1_000_000]
var delays = [0.0, 600, 3600]
var args = Array(CommandLine.arguments.dropFirst())
func fail(_ message: String) -> Never {
    let text = Array("simulate-fleet: \(message)\n".utf8)
    _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(2)
}
while !args.isEmpty {
    let flag = args.removeFirst()
    guard let value = args.first else { fail("\(flag) needs a value") }
    args.removeFirst()
    switch flag {
    case "--seed": seed = UInt64(value) ?? { fail("bad --seed") }()
    case "--size": size = Double(value) ?? { fail("bad --size") }()
    case "--requests": requests = Int(value) ?? { fail("bad --requests") }()
    case "--bandwidth": bandwidth = Double(value) ?? { fail("bad --bandwidth") }()
    case "--devices": fleet = value.split(separator: ",").map { Int($0) ?? { fail("bad --devices") }() }
    case "--delays": delays = value.split(separator: ",").map { Double($0) ?? { fail("bad --delays") }() }
    default: fail("unknown option \(flag)")
    }
}
guard size > 0, bandwidth > 0, requests > 0 else { fail("--size, --bandwidth and --requests must be positive") }

print("origin load: \(number(size)) bytes a device in \(requests) requests at \(human(bandwidth)) a device (seed \(seed))")
print("devices     | delay   | peak req/s | uniform req/s | peak bytes/s | uniform bytes/s")
print("------------|---------|------------|---------------|--------------|----------------")
for n in fleet {
    for d in delays {
        let load = simulate(devices: n, delay: d, size: size, requests: requests, bandwidth: bandwidth, seed: seed)
        let delay = d == 0 ? "0" : (d >= 3600 ? "\(Int(d / 3600)) h" : "\(Int(d / 60)) min")
        let uniform = load.meanRequests > 0
        print([number(Double(n)).padding(11), delay.padding(7), number(load.peakRequests).padding(10),
               (uniform ? number(load.meanRequests) : "-").padding(13), human(load.peakBytes).padding(12),
               uniform ? human(load.meanBytes) : "-"].joined(separator: " | "))
    }
}

extension String {
    func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
