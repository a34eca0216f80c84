import LocalModelKit

/// `catalog update [--from URL]`: fetch a signed catalog and accept it when a trusted key
/// signed it, it is newer than the one in use, has not expired and validates. The engine
/// decides (`LocalModelEngine.updateCatalog`); this file only reads the line and prints.
enum CatalogUpdateCommand {
    /// Where the catalog comes from, and how hard to try.
    struct Options: OptionGroup {
        let from = Option("--from", value: "URL", help: "The catalog's URL (default $EXTENTOS_CATALOG_URL).", .text)
        let retry = RetryOptions()
    }
    static let options = Options()

    static let command = Command(
        "catalog update", abstract: "Fetch a signed catalog and use it from now on when it is newer and valid.",
        discussion: "URL names the catalog file; its Ed25519 signature is at URL.sig. At most 1 MiB is read. Refused (and nothing changed): a signature not by a trusted key, a lower catalogVersion (a rollback, recorded in the history), an expired catalog, an invalid one. On network trouble the catalog already in use stays in use.",
        options: options,
        exits: [ExitCase(.ok, "Accepted, or the same version is already in use (nothing to do)."),
                ExitCase(.integrity, "The signature is not by a trusted key."),
                ExitCase(.invalidCatalog, "A lower catalogVersion (a rollback), an expired catalog, or an invalid one."),
                ExitCase(.temporary, "Network trouble.")],
        run: run)

    static func run(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let inv = context.invocation
        guard let url = inv[options.from] ?? context.environment["EXTENTOS_CATALOG_URL"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            throw .usage("no catalog URL: pass --from URL or set EXTENTOS_CATALOG_URL", of: inv.command)
        }
        if let problem = CatalogRules.urlProblem(url) {
            throw .usage("\(options.from.name) \(URLOrigin.redacted(url)): \(problem)", of: inv.command)
        }
        let options = try TransferCommands.options(context)
        let interrupt = InterruptHandler()
        let engine = try context.engine()
        let keys = context.trustedKeys()
        let outcome = try context.attempt {
            try engine.updateCatalog(from: url, keys: keys, options: options, cancellation: interrupt.flag).outcome
        }
        let c = context.console
        switch outcome {
        case let .accepted(version, previous, signer):
            if c.json {
                c.printJSON(["url": .string(url), "outcome": "accepted", "catalogVersion": JSONValue(version),
                             "previousVersion": JSONValue(previous), "key": .string(signer)])
            } else {
                c.say("catalog version \(version) accepted from \(url) (signed by \(signer)); it was \(previous)")
            }
        case .upToDate(let version):
            if c.json {
                c.printJSON(["url": .string(url), "outcome": "upToDate", "catalogVersion": JSONValue(version)])
            } else {
                c.say("catalog version \(version) is already in use; nothing to do")
            }
        }
        return .ok
    }
}
