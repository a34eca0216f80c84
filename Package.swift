// swift-tools-version:6.0
// GlassesLocal — the on-device model manager of the Extentos smart-glasses SDK.
import PackageDescription

// The commit `glasses-local --version` names. Scripts/ship sets GLASSES_LOCAL_COMMIT (from
// `git describe`) for the shipping build; it becomes a C string in CBuildInfo alone, so only
// that file is recompiled when it changes. Any other build says "unknown". Only
// [0-9A-Za-z._+-] is taken (at most 64 characters): nothing else can reach the C source.
let buildCommit: String? = Context.environment["GLASSES_LOCAL_COMMIT"].flatMap { value in
    let allowed = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._+-")
    return !value.isEmpty && value.count <= 64 && value.allSatisfy(allowed.contains) ? value : nil
}

let package = Package(
    name: "GlassesLocal",
    products: [
        .library(name: "GlassesLocal", targets: ["GlassesLocal"]),
        .library(name: "GlassesLocalVoice", targets: ["GlassesLocalVoice"]),
        .library(name: "GlassesCore", targets: ["GlassesCore"]),
        .library(name: "LocalModelKit", targets: ["LocalModelKit"]),
        .executable(name: "glasses-local", targets: ["glasses-local"]),
    ],
    targets: [
        // C system libraries: one target each, Debian -dev packages as providers.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // libcurl, libarchive and libbz2: their headers here, their code opened on first use
        // by CLibraryLoader (dlopen), so a command that neither downloads nor unpacks starts
        // without loading them and their dependencies.
        .systemLibrary(name: "CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CArchive", providers: [.apt(["libarchive-dev"])]),
        .systemLibrary(name: "CBZip2", providers: [.apt(["libbz2-dev"])]),
        // sd-bus (libsystemd), opened the same way: only `prefetch --require-unmetered` asks
        // NetworkManager over the system bus whether the connection is metered.
        .systemLibrary(name: "CSDBus", providers: [.apt(["libsystemd-dev"])]),
        .target(name: "CLibraryLoader", linkerSettings: [.linkedLibrary("dl")]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // Linux calls Glibc's module leaves out (syncfs, sync_file_range), compiled in C.
        .target(name: "CSystem", cSettings: [.define("_GNU_SOURCE")]),

        // The engine: instance-based, no global state.
        .target(
            name: "LocalModelKit",
            dependencies: ["CSQLite", "CCurl", "CArchive", "CBZip2", "CCrypto", "CSDBus", "CSystem", "CLibraryLoader"]
        ),
        // The SDK seam: Extentos.create(config:) and the local-tier registry.
        .target(name: "GlassesCore"),
        // Public facades.
        .target(name: "GlassesLocal", dependencies: ["LocalModelKit", "GlassesCore"]),
        .target(name: "GlassesLocalVoice", dependencies: ["GlassesLocal", "GlassesCore", "LocalModelKit"]),
        // The command-line tool, and the build's commit for its --version (see buildCommit).
        .target(name: "CBuildInfo", cSettings: buildCommit.map { [.define("GLASSES_LOCAL_COMMIT", to: "\"\($0)\"")] } ?? []),
        .executableTarget(name: "glasses-local", dependencies: ["LocalModelKit", "CBuildInfo"]),

        // Benchmark driver for Scripts/bench (not a product).
        .executableTarget(name: "glasses-local-bench", dependencies: ["LocalModelKit", "GlassesCore", "GlassesLocal"]),
        // Development tool behind Scripts/simulate-fleet (not a product).
        .executableTarget(name: "simulate-fleet"),
        // Development tool behind Scripts/embed-catalog (not a product).
        .executableTarget(name: "embed-catalog", dependencies: ["LocalModelKit"]),
        // Test-only: a second process that hammers a records database (P9 tests).
        .executableTarget(
            name: "records-stress",
            dependencies: ["LocalModelKit"],
            path: "Tests/Tools/records-stress"
        ),

        // Test-only: one SDK start-up order per process (register/create ordering tests).
        .executableTarget(
            name: "seam-probe",
            dependencies: ["GlassesCore", "GlassesLocal", "GlassesLocalVoice"],
            path: "Tests/Tools/seam-probe"
        ),

        // Test-only: an app written against the upstream SDK's public API, compiled unchanged
        // (the voice issue's source-compatibility check); UpstreamAppTests runs it.
        .executableTarget(
            name: "upstream-app",
            dependencies: ["GlassesCore", "GlassesLocal", "GlassesLocalVoice"],
            path: "Tests/Fixtures/upstream-app"
        ),

        // Test-only: the network guard, started in the test runner before its first test (a
        // proxy on 127.0.0.1 that refuses and logs every connection off loopback).
        .target(name: "CTestNetGuard", path: "Tests/NetGuard"),
        // Test-only: finding built programs and running them, the network guard's checks
        // (shared by the test targets).
        .target(name: "GlassesTestSupport", dependencies: ["CTestNetGuard"], path: "Tests/Support"),

        .testTarget(
            name: "LocalModelKitTests",
            dependencies: ["LocalModelKit", "GlassesCore", "records-stress", "GlassesTestSupport"],
            exclude: ["Inputs"]
        ),
        .testTarget(name: "GlassesCoreTests", dependencies: ["GlassesCore", "GlassesTestSupport"]),
        .testTarget(name: "GlassesLocalTests",
                    dependencies: ["GlassesLocal", "GlassesLocalVoice", "GlassesCore", "LocalModelKit", "seam-probe",
                                   "GlassesTestSupport"]),
        // Runs the built glasses-local binary (the dependency makes `swift test` build it).
        .testTarget(name: "GlassesLocalCLITests", dependencies: ["glasses-local", "upstream-app", "simulate-fleet", "LocalModelKit", "GlassesTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
