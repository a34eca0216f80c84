import Foundation
import GlassesTestSupport
import Testing

/// Scripts/simulate-fleet's model of the origin's load, against the closed form for a
/// uniform spread, and its determinism.
@Suite("Fleet simulation", .ownThreads, .networkGuard)
struct FleetSimulationTests {
    static func run(_ arguments: [String]) throws -> CLIResult {
        let binary = try #require(BuiltProduct.path("simulate-fleet"), "simulate-fleet was not built")
        return try World.tool(binary, arguments)
    }

    /// The numbers of the one table row, by column.
    static func row(_ r: CLIResult) -> [String] {
        (r.stdoutLines.last ?? "").split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
    }

    @Test("20,000 devices spread uniformly over 1,000 s: peak requests within a few standard deviations of N/D, peak bytes near N·S/D; the same seed gives the same table")
    func closedForm() throws {
        let args = ["--devices", "20000", "--delays", "1000", "--size", "100000000", "--requests", "1", "--bandwidth", "10000000", "--seed", "7"]
        let r = try Self.run(args)
        #expect(r.status == 0, "\(r)")
        let cells = Self.row(r)
        try #require(cells.count == 6, "\(r.stdout)")
        let peakRequests = try #require(Double(cells[2].replacingOccurrences(of: ",", with: "")))
        let lambda = 20_000.0 / 1_000
        #expect(cells[3] == "20", "the closed form N·R/D: \(cells)")
        #expect(peakRequests >= lambda && peakRequests <= lambda + 6 * lambda.squareRoot(), "peak \(peakRequests) vs λ \(lambda)")
        // N·S/D = 2 GB/s: about N·(S/B)/D = 200 downloads in flight at a time (Poisson), so
        // the busiest second stays within a few standard deviations of it.
        #expect(cells[5] == "2.0 GB/s", "\(cells)")
        let peakBytes = try #require(Double(cells[4].replacingOccurrences(of: " GB/s", with: "")))
        let inFlight = 20_000.0 * 10 / 1_000
        #expect(peakBytes >= 2.0 && peakBytes <= 2.0 * (1 + 6 / inFlight.squareRoot()), "\(cells)")
        #expect(try Self.run(args).stdout == r.stdout, "deterministic")
        let other = try Self.run(Array(args.dropLast(2)) + ["--seed", "8"])
        #expect(other.stdout != r.stdout, "another seed, another draw")
    }

    @Test("with no delay every device hits the origin in the same second")
    func noSpread() throws {
        let r = try Self.run(["--devices", "10000", "--delays", "0", "--size", "100000000", "--requests", "1", "--bandwidth", "10000000"])
        let cells = Self.row(r)
        #expect(cells.count == 6 && cells[2] == "10,000" && cells[4] == "100 GB/s" && cells[3] == "-", "\(r.stdout)")
    }
}
