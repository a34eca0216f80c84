// A child process for the tests, spawned with posix_spawn and reaped with waitpid by pid.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What the tests used Foundation's `Process` for, without its SIGCHLD machinery.
///
/// Under many threads spawning at once, `Process` sometimes never reaps a child that has
/// exited (it stays a zombie, `isRunning` stays true, `waitUntilExit` spins forever): a
/// test run was seen hung for an hour on exactly that. Here the child is reaped by its own
/// pid with `waitpid`, by whoever asks first; nothing depends on a signal arriving.
public final class Subprocess: @unchecked Sendable {
    // @unchecked: the configuration is set before `run()`; the outcome is guarded by `lock`.
    public enum TerminationReason: Sendable { case exit, uncaughtSignal }

    public var executableURL: URL?
    public var arguments: [String] = []
    public var environment: [String: String]?
    public var currentDirectoryURL: URL?
    /// `FileHandle` or `Pipe` (its reading end for stdin, its writing end for output).
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?

    public private(set) var processIdentifier: Int32 = 0
    private let lock = NSLock()
    private var outcome: (status: Int32, signaled: Bool)?   // guarded by `lock`

    public init() {}

    public func run() throws {
        guard let executable = executableURL?.path else { throw CocoaError(.fileNoSuchFile) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var toClose: Set<Int32> = []
        func wire(_ handle: Any?, to target: Int32, reading: Bool) {
            let fd: Int32
            switch handle {
            case let pipe as Pipe:
                fd = reading ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
                // Neither end may stay open in the child (or in any other child) past the dup2:
                // a writer left open there would keep the reader from ever seeing EOF.
                for end in [pipe.fileHandleForReading.fileDescriptor, pipe.fileHandleForWriting.fileDescriptor] {
                    _ = fcntl(end, F_SETFD, FD_CLOEXEC)
                    toClose.insert(end)
                }
            case let file as FileHandle:
                fd = file.fileDescriptor
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            default:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", reading ? O_RDONLY : O_WRONLY, 0)
                return
            }
            posix_spawn_file_actions_adddup2(&actions, fd, target)
        }
        wire(standardInput, to: 0, reading: true)
        wire(standardOutput, to: 1, reading: false)
        wire(standardError, to: 2, reading: false)
        for fd in toClose where fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }
        if let directory = currentDirectoryURL?.path {
            // glibc 2.29+; Swift's Glibc module leaves the GNU extension out, so found at run time.
            typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np") else {
                throw POSIXError(.ENOSYS)
            }
            _ = unsafeBitCast(symbol, to: AddChdir.self)(&actions, directory)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child starts with default signal handling and nothing blocked, whatever the
        // test runner's threads have set up.
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        // The network guard's proxy goes to every child (this process's environment has it).
        let env = (environment.map(NetworkGuard.guarded) ?? ProcessInfo.processInfo.environment)
            .map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { env.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, env)
        guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
        processIdentifier = pid
        NetworkGuard.started(pid: pid, command: [executable] + arguments)
        // As Foundation does: the child's ends of the pipes are closed here, so a reader of
        // the child's output sees EOF when the child ends, and the child sees EOF on stdin
        // when this side closes its end.
        if let pipe = standardInput as? Pipe { try? pipe.fileHandleForReading.close() }
        if let pipe = standardOutput as? Pipe { try? pipe.fileHandleForWriting.close() }
        if let pipe = standardError as? Pipe { try? pipe.fileHandleForWriting.close() }
    }

    /// Reaps the child if it has ended (`block`: waits until it does).
    @discardableResult
    private func reap(block: Bool) -> (status: Int32, signaled: Bool)? {
        lock.lock()
        defer { lock.unlock() }
        if let outcome { return outcome }
        guard processIdentifier > 0 else { return nil }
        var status: Int32 = 0
        while true {
            let r = waitpid(processIdentifier, &status, block ? 0 : WNOHANG)
            if r == -1 && errno == EINTR { continue }
            if r == 0 { return nil }
            if r == -1 {
                // Reaped elsewhere (should not happen): call it a failure, never hang.
                outcome = (1, false)
                return outcome
            }
            break
        }
        let signal = status & 0x7F
        outcome = signal == 0 ? ((status >> 8) & 0xFF, false) : (signal, true)
        return outcome
    }

    public var isRunning: Bool { processIdentifier > 0 && reap(block: false) == nil }

    public func waitUntilExit() {
        // Polled, not a blocking waitpid under the lock: `isRunning` must stay answerable.
        while reap(block: false) == nil { usleep(2_000) }
    }

    public func terminate() {
        if isRunning { kill(processIdentifier, SIGTERM) }
    }

    public var terminationStatus: Int32 { reap(block: false)?.status ?? 0 }
    public var terminationReason: TerminationReason { reap(block: false)?.signaled == true ? .uncaughtSignal : .exit }
}
