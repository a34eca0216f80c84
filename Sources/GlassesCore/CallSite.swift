#if canImport(Runtime)
// The image list is read with the runtime's checked reader (`process_vm_readv`), which is
// SPI; the plain `Backtrace.capture()` probes every file mapping with loads and crashes
// when another thread unmaps one meanwhile.
@_spi(MemoryReaders) @_spi(Internal) import Runtime
#endif

/// Where in the app a call into the SDK was made, for the register-before-create
/// diagnostic.
///
/// Upstream's `Extentos.create(config:)` and `ExtentosLocalTier.register()` take no call-site
/// parameters (and must not: `let make: (ExtentosConfig) -> ExtentosGlasses = Extentos.create`
/// has to compile), so the site is read from the call stack instead. Capturing it is a walk of
/// the frame pointers; naming it (symbols, and the file and line from the debug information)
/// is done only when a diagnostic needs the text, which is when a registration came late. A
/// build without debug information gets the function's name; one without symbols gets "".
/// See docs/ARCHITECTURE.md, "The SDK seam".
final class CallSite: Sendable {
    private let resolve: @Sendable () -> String
    private let resolved = Locked<String?>(nil)

    private init(_ resolve: @escaping @Sendable () -> String) {
        self.resolve = resolve
    }

    /// A site given as text (`#fileID:#line` in tests).
    static func named(_ text: String) -> CallSite {
        CallSite { text }
    }

    /// No site: nothing will ever ask for it.
    static let unknown = CallSite { "" }

    /// The app's frame on the current call stack: the first frame below every frame of the
    /// SDK's own modules (and of the capture itself). The stack is captured now; it is
    /// named on the first read of ``text``. Safe while other threads map and unmap files.
    static func here() -> CallSite {
        #if canImport(Runtime)
        if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
            // The images first, read where a mapping that goes away meanwhile is an error, not
            // a crash (another thread closing a records connection unmaps its `-shm`).
            let images = ImageMap.capture(using: LocalMemoryReader())
            if let backtrace = try? Backtrace.capture(limit: 48, top: 0, images: images) {
                return CallSite { appFrame(in: backtrace) }
            }
        }
        #endif
        return unknown
    }

    /// `Folder/File.swift:line` of the app's call (the folder is the source file's own, as
    /// `#fileID` names a module), else the calling function's name, else "".
    var text: String {
        if let done = resolved.withLock({ $0 }) { return done }
        let text = resolve()
        resolved.withLock { $0 = text }
        return text
    }

    /// The modules whose frames are the SDK's, not the app's.
    static let sdkModules: Set<Substring> = ["Runtime", "GlassesCore", "GlassesLocal", "GlassesLocalVoice"]

    /// The module of a Swift symbol, from its mangled name (`$s11GlassesCore8ExtentosO…`:
    /// the first identifier after `$s` is the module's); nil for anything else (C, `main`).
    static func module(ofMangled name: String) -> Substring? {
        guard name.hasPrefix("$s") else { return nil }
        let rest = name.dropFirst(2)
        let digits = rest.prefix { $0.isASCII && $0.isNumber }
        guard let length = Int(digits), length > 0 else { return nil }
        let identifier = rest.dropFirst(digits.count).prefix(length)
        return identifier.count == length ? identifier : nil
    }

    /// How the names of functions the compiler made begin.
    static let compilerMade = ["implicit closure #", "thunk for ", "reabstraction thunk", "partial apply for "]

    /// `Folder/File.swift:line` of a source path and line.
    static func describe(path: String, line: Int) -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        return parts.suffix(2).joined(separator: "/") + ":\(line)"
    }

    #if canImport(Runtime)
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    private static func appFrame(in backtrace: Backtrace) -> String {
        guard let symbolicated = backtrace.symbolicated() else { return "" }
        for frame in symbolicated.frames {
            guard let symbol = frame.symbol else { continue }
            if let module = module(ofMangled: symbol.rawName), sdkModules.contains(module) { continue }
            if let location = symbol.sourceLocation, location.line > 0 {
                return describe(path: location.path, line: location.line)
            }
            // Code the compiler made has no line of its own (the closure that holds a call kept
            // as a value, a thunk): its caller is the app's call. (The runtime's thunk test
            // alone would not do: it takes an allocating `init` for one; a line decides.)
            if frame.isSwiftThunk || compilerMade.contains(where: symbol.name.hasPrefix) { continue }
            return symbol.name
        }
        return ""
    }
    #endif
}
