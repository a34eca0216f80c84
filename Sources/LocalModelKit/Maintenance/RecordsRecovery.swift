/// What a damaged records database means for the models on disk, and what recovering
/// from it costs — so `doctor` can say so, model by model.
///
/// glasses-local never deletes or rewrites a damaged `records.sqlite3`: the user moves it
/// (with its `-wal` and `-shm` files, which belong to it) aside. The next time the store is
/// opened (`glasses-local doctor`, or a `download`), new empty records are created — the
/// install records and the history are lost — and the start-up repair (`StoreRepair`) moves
/// every model folder that has no record to `.partial/<id>`. What happens next depends on
/// the model's first source:
///
/// - `files`: the next download re-hashes the files in `.partial/<id>` and accepts each
///   one that matches the catalog without any request (`FileJob.prepare`); only a missing,
///   short or mismatching file is fetched.
/// - `archive` (the Kokoro voice): the archive was removed after the install, and the
///   extracted tree is not a resume base for it, so the next download fetches the archive
///   again.
///
/// When `.partial/<id>` already holds an unfinished download, the repair cannot move the
/// folder there and removes it instead; the download then resumes from that partial.
package struct RecordsRecovery: Sendable, Equatable {
    /// What happens to one model found on disk once the records are started afresh.
    package enum Outcome: Sendable, Equatable {
        /// Moved to `.partial/<id>` at the next open; the next download re-verifies these
        /// files from disk and fetches only what is missing or does not match.
        case reverifiedFromDisk(files: Int)
        /// Installed from an archive that is not kept: the next download fetches this many
        /// bytes again.
        case fetchedAgain(bytes: Int64)
        /// `.partial/<id>` already holds a download: the next open removes the installed
        /// folder, and the next download resumes from that partial.
        case replacedByPartial
    }

    /// A model found on disk, and what recovery will do with it.
    package struct Model: Sendable, Equatable {
        /// Its catalog id.
        package var id: String
        /// The installed folder found on disk.
        package var folder: String
        /// What happens to it once new records start.
        package var outcome: Outcome
    }

    /// The damaged database.
    package var recordsPath: String
    /// Catalog models with an installed folder on disk.
    package var models: [Model]

    /// A shell line that moves the database and its `-wal`/`-shm` files aside, deleting
    /// nothing (`RecordsError.moveAsideCommand(recordsPath:)`, which the error's own message names).
    package static func moveAsideCommand(recordsPath: String) -> String {
        RecordsError.moveAsideCommand(recordsPath: recordsPath)
    }

    /// ``moveAsideCommand(recordsPath:)`` for this store's database.
    package var moveAsideCommand: String { Self.moveAsideCommand(recordsPath: recordsPath) }
}

extension LocalModelEngine {
    /// The catalog models as far as the disk alone tells, for when the records cannot be
    /// read (a damaged database): nothing counts as installed, partial data on disk counts
    /// as present, and no other download's reservation is known. Reads no records.
    package func modelsWithoutRecords() throws(LocalModelError) -> [ModelStatus] {
        let space = try probe.space(at: layout.root)
        return catalog.models.map { model in
            let fit = storageFit(model, installed: false, space: space, reservedByOthers: 0)
            return ModelStatus(model: model, isInstalled: false, isPartial: fit.presentBytes > 0, fit: fit)
        }
    }

    /// What starting the records afresh would do to each model found on disk (see
    /// ``RecordsRecovery``). Reads no records; changes nothing.
    package func recordsRecovery() -> RecordsRecovery {
        var models: [RecordsRecovery.Model] = []
        for model in catalog.models {
            let folder = layout.installPath(id: model.id, kind: model.kind)
            guard FileIO.isDirectory(folder) else { continue }
            let outcome: RecordsRecovery.Outcome
            if FileIO.exists(layout.partialPath(id: model.id)) {
                outcome = .replacedByPartial
            } else if model.preferredDelivery?.vouchesForUnhashedFiles == true {
                outcome = .fetchedAgain(bytes: max(0, model.downloadBytes - partialBytes(model)))
            } else {
                outcome = .reverifiedFromDisk(files: model.files.count)
            }
            models.append(RecordsRecovery.Model(id: model.id, folder: folder, outcome: outcome))
        }
        return RecordsRecovery(recordsPath: layout.recordsPath, models: models)
    }
}
