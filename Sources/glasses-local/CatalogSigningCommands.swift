import LocalModelKit

/// `catalog keygen | sign | verify`: Ed25519 signatures over the exact bytes of a catalog
/// file, interoperable with OpenSSL (PEM keys, `FILE.sig` holding the base64 of the 64-byte
/// signature, as `openssl pkeyutl -sign -rawin` makes it). For whoever publishes catalogs.
enum CatalogSigningCommands {
    /// `catalog sign`'s options.
    struct SignOptions: OptionGroup {
        let key = Option("--key", value: "KEY", help: "The private key (PEM), from catalog keygen.", .file, required: true)
        let sig = Option("--sig", value: "SIG", help: "Where the signature goes (default FILE.sig).", .file)
    }
    static let signOptions = SignOptions()

    /// `catalog verify`'s options.
    struct VerifyOptions: OptionGroup {
        let sig = Option("--sig", value: "SIG", help: "The signature file (default FILE.sig).", .file)
        let key = Option("--key", value: "KEY", help: "The public key (PEM) to check against.", .file)
    }
    static let verifyOptions = VerifyOptions()

    static let commands: [Command] = [
        Command("catalog keygen", abstract: "Make an Ed25519 key pair for signing catalogs: OUT (private) and OUT.pub.",
                discussion: "The private key is PEM PKCS#8, written readable by its owner only; keep it off devices and out of repositories. The public key (SubjectPublicKeyInfo PEM) goes in Catalog/keys/ for the build to trust it.",
                arguments: [Argument("out", "The private key file to create (OUT.pub gets the public key).", completion: .file)],
                run: keygen),
        Command("catalog sign", abstract: "Sign a catalog file: writes FILE.sig (base64 of the Ed25519 signature).",
                arguments: [Argument("file", "The catalog JSON file, signed byte for byte.", completion: .file)],
                options: signOptions, run: sign),
        Command("catalog verify", abstract: "Check a catalog file's signature; exit 0 only when it is valid.",
                discussion: "Uses the trusted keys (those built in from Catalog/keys/, and the *.pub files in $EXTENTOS_CATALOG_KEYS) unless --key names one.",
                arguments: [Argument("file", "The catalog JSON file.", completion: .file)],
                options: verifyOptions, exits: [ExitCase(.integrity, "The signature does not verify.")], run: verify),
    ]

    static func read(_ path: String, _ what: String, limit: Int = 1 << 20) throws(CLIError) -> [UInt8] {
        do {
            return try FileIO.readNamedInput(path, limit: limit)
        } catch {
            throw CLIError(.io, message: "cannot read the \(what) \(path): \(error.message)")
        }
    }

    static func keygen(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let out = context.invocation.positional[0]
        for path in [out, out + ".pub"] where FileIO.exists(path) {
            throw CLIError(.io, message: "\(path) exists; keygen never overwrites a key. Choose another name.")
        }
        do {
            let pair = try Ed25519.generate()
            // Never replacing: a file or link that appears at either name meanwhile stops
            // keygen instead of being overwritten (or written through).
            try FileIO.writeFileAtomically(Array(pair.privatePEM.utf8), toPath: out, mode: 0o600, replacing: false)
            do {
                try FileIO.writeFileAtomically(Array(pair.publicPEM.utf8), toPath: out + ".pub", mode: 0o644, replacing: false)
            } catch {
                // A private key without its public half is of no use: take back the one just made.
                _ = try? FileIO.removeTree(out)
                throw error
            }
        } catch {
            throw CLIError.from(error)
        }
        context.console.say("wrote the private key \(out) (readable by you only) and the public key \(out).pub")
        return .ok
    }

    static func sign(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let inv = context.invocation
        let file = inv.positional[0]
        let keyPath = inv.required(signOptions.key)
        let message = try read(file, "catalog")
        let key = String(decoding: try read(keyPath, "private key", limit: TrustedCatalogKeys.maxKeyFileBytes), as: UTF8.self)
        let sigPath = inv[signOptions.sig] ?? file + ".sig"
        do {
            let signature = try Ed25519.sign(message, privatePEM: key)
            try FileIO.writeFileAtomically(Array((Base64.encode(signature) + "\n").utf8), toPath: sigPath)
        } catch {
            throw CLIError.from(error)
        }
        context.console.say("wrote \(sigPath)")
        return .ok
    }

    static func verify(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let inv = context.invocation
        let file = inv.positional[0]
        let sigPath = inv[verifyOptions.sig] ?? file + ".sig"
        let message = try read(file, "catalog")
        let signatureText = try read(sigPath, "signature", limit: 4096)
        let keys: [(name: String, pem: String)]
        if let keyPath = inv[verifyOptions.key] {
            keys = [(keyPath, String(decoding: try read(keyPath, "public key", limit: TrustedCatalogKeys.maxKeyFileBytes), as: UTF8.self))]
        } else {
            keys = context.trustedKeys()
        }
        guard let signer = CatalogSignature.signer(of: message, signatureText: signatureText, keys: keys) else {
            throw CLIError(LocalModelError.catalogSignatureInvalid(source: file, signature: sigPath, keys: keys.map(\.name)))
        }
        if context.console.json {
            context.console.printJSON(["valid": .bool(true), "key": .string(signer)])
        } else {
            context.console.say("\(file): valid signature by \(signer)")
        }
        return .ok
    }
}
