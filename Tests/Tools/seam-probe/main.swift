// Test-only: runs one SDK start-up order in a fresh process and prints what the SDK made
// of it as JSON (the diagnostics, each instance's local-tier status, its autoChoice).
// GlassesLocalTests run it, because the registry is process-wide by design.
//
//   seam-probe create-then-register | register-then-create | stored-property | fixed-app
//              | by-reference | strict | strict-config | concurrent | no-io
//
// Call sites are found on the call stack, `Folder/File.swift:line` (this file's folder
// is `here`): each scenario prints the ones it expects as `createSite` / `registerSite`.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import GlassesCore
import GlassesLocal
import GlassesLocalVoice

func describe(_ glasses: any ExtentosGlasses) -> [String: Any] {
    let choice = glasses.autoChoice()
    return ["createdAt": glasses.createdAt, "localTier": "\(glasses.localTier)", "localTierAvailable": glasses.localTier.isAvailable,
            "localVoice": "\(glasses.localVoice)",
            "autoChoice": ["modelId": choice.modelId as Any, "isLocal": choice.isLocal,
                           "cloudReason": choice.cloudReason?.rawValue as Any, "cloudDetail": choice.cloudDetail?.rawValue as Any,
                           "downloadTarget": choice.downloadTarget as Any]]
}

/// `seam-probe/main.swift`, as the SDK names a place in this file.
let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent().lastPathComponent + "/main.swift"

func emit(_ instances: [String: any ExtentosGlasses], extra: [String: Any] = [:]) {
    var doc = extra
    doc["instances"] = instances.mapValues(describe)
    doc["diagnostics"] = Extentos.diagnostics.map {
        ["code": $0.code.rawValue, "tier": $0.tier.rawValue, "createSite": $0.createSite, "registerSite": $0.registerSite,
         "instancesAffected": $0.instancesAffected, "message": $0.message] as [String: Any]
    }
    let direct = ExtentosLocalTier.autoChoice()
    doc["direct"] = ["modelId": direct.modelId as Any, "cloudReason": direct.cloudReason?.rawValue as Any,
                     "cloudDetail": direct.cloudDetail?.rawValue as Any]
    guard let data = try? JSONSerialization.data(withJSONObject: doc, options: [.sortedKeys]) else { exit(3) }
    FileHandle.standardOutput.write(data)
}

/// The mistake the iOS documents warn about: the stored property runs before init().
struct LateApp {
    let glasses = Extentos.create(config: ExtentosConfig(usedCapabilities: [.microphone, .speaker]))
    static let createLine = #line - 1

    init() {
        ExtentosLocalTier.register()
        ExtentosLocalVoice.register()
    }
    static let registerLines = (#line - 3, #line - 2)
}

/// The documented fix: no initializer on the property, assigned after register().
struct FixedApp {
    let glasses: any ExtentosGlasses

    init() {
        ExtentosLocalTier.register()
        ExtentosLocalVoice.register()
        glasses = Extentos.create(config: ExtentosConfig(usedCapabilities: [.microphone, .speaker]))
    }
}

let scenario = CommandLine.arguments.dropFirst().first ?? ""
switch scenario {
case "create-then-register":
    let early = Extentos.create(config: ExtentosConfig(usedCapabilities: [.microphone, .speaker])); let createLine = #line
    let alsoEarly = Extentos.default()
    // Late; then again: harmless, no second diagnostic.
    let registerLine = #line + 1
    ExtentosLocalTier.register()
    ExtentosLocalTier.register()
    let later = Extentos.default()
    emit(["early": early, "alsoEarly": alsoEarly, "later": later],
         extra: ["createSite": "\(here):\(createLine)", "registerSite": "\(here):\(registerLine)"])

case "by-reference":
    // Upstream's calls kept as unannotated values, called late: the sites are still the calls'.
    let make: (ExtentosConfig) -> ExtentosGlasses = Extentos.create
    let setUp = ExtentosLocalTier.register
    let glasses = make(ExtentosConfig()); let createLine = #line
    setUp(); let registerLine = #line
    emit(["glasses": glasses], extra: ["createSite": "\(here):\(createLine)", "registerSite": "\(here):\(registerLine)"])

case "register-then-create":
    ExtentosLocalTier.register()
    ExtentosLocalVoice.register()
    let glasses = Extentos.create(config: ExtentosConfig(appId: "com.example.probe", usedCapabilities: [.microphone, .speaker]))
    emit(["glasses": glasses])

case "stored-property":
    let app = LateApp()
    emit(["app": app.glasses], extra: ["createSite": "\(here):\(LateApp.createLine)",
                                       "registerSites": ["\(here):\(LateApp.registerLines.0)", "\(here):\(LateApp.registerLines.1)"]])

case "fixed-app":
    emit(["app": FixedApp().glasses])

case "strict", "strict-config":
    let glasses = Extentos.create(config: ExtentosConfig(strictRegistrationOrder: scenario == "strict-config"))
    ExtentosLocalTier.register()
    print("still running after a late register()")
    emit(["glasses": glasses])

case "concurrent":
    // 16 threads register both tiers at once, 200 times each; then an instance is created.
    let group = DispatchGroup()
    for _ in 0..<16 {
        DispatchQueue.global().async(group: group) {
            for _ in 0..<200 {
                ExtentosLocalTier.register()
                ExtentosLocalVoice.register()
            }
        }
    }
    group.wait()
    emit(["glasses": Extentos.default()])

case "no-io":
    // Markers around the calls, so a syscall trace can show nothing happens in between.
    _ = "BEGIN\n".withCString { write(1, $0, 6) }
    ExtentosLocalTier.register()
    ExtentosLocalVoice.register()
    ExtentosLocalTier.register()
    _ = "END\n".withCString { write(1, $0, 4) }
    // The first query opens the store (lazily, here).
    _ = ExtentosLocalTier.models()

default:
    FileHandle.standardError.write(Data("usage: seam-probe create-then-register|register-then-create|stored-property|fixed-app|by-reference|strict|strict-config|concurrent|no-io\n".utf8))
    exit(2)
}
