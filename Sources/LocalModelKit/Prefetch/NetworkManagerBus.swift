// The only Swift file that touches sd-bus (libsystemd, opened on first use through
// CLibraryLoader): one property read from NetworkManager over the system bus.
// https://www.freedesktop.org/software/systemd/man/latest/sd-bus.html
internal import CSDBus

/// NetworkManager's `Metered` property (`org.freedesktop.NetworkManager.Metered`, an
/// `NMMetered`): whether the primary connection costs by the byte.
/// https://networkmanager.dev/docs/api/latest/nm-dbus-types.html#NMMetered
enum NetworkManagerBus {
    /// `NMMetered`: 0 unknown, 1 yes, 2 no, 3 guess-yes, 4 guess-no.
    static let meteredNames = ["unknown", "yes", "no", "guess-yes", "guess-no"]

    /// How long NetworkManager may take to answer; past it the state is unknown.
    static let timeoutMicroseconds: UInt64 = 2_000_000

    /// Reads `Metered` from NetworkManager on the system bus (`DBUS_SYSTEM_BUS_ADDRESS`,
    /// else `/run/dbus/system_bus_socket`, as sd-bus finds it), without starting
    /// NetworkManager when it is not running (no auto-start). `busAddress` only names the
    /// bus in messages.
    /// - Returns: the value, or why there is none (no libsystemd, no system bus, no
    ///   NetworkManager on it, a refusal).
    static func metered(busAddress: String) -> Result<UInt32, MeteredProblem> {
        // sd-bus bounds the method call, not the connection: a bus that accepts and never
        // completes its handshake holds `sd_bus_open_system` for its 90-second authentication
        // timeout. The question runs on a thread of its own, and past the timeout the answer
        // is "unknown" whatever the thread is still waiting for (it ends by itself).
        final class Answer: @unchecked Sendable {
            // @unchecked: `result` is only touched under `lock`.
            let lock = Threads.Lock()
            var result: Result<UInt32, MeteredProblem>?
        }
        let answer = Answer()
        let started = Threads.tryStart(name: "glasses-nm-metered") {
            let result = ask(busAddress: busAddress)
            answer.lock.withLock {
                answer.result = result
                answer.lock.broadcast()
            }
        }
        guard started else { return ask(busAddress: busAddress) }
        let deadline = monotonicSeconds() + Double(timeoutMicroseconds) / 1_000_000
        return answer.lock.withLock {
            while answer.result == nil {
                let left = deadline - monotonicSeconds()
                if left <= 0 { break }
                answer.lock.wait(seconds: left)
            }
            return answer.result ?? .failure(.noNetworkManager("the system bus at \(busAddress) did not answer within \(timeoutMicroseconds / 1_000_000) s"))
        }
    }

    /// The question itself, blocking (see `metered`).
    private static func ask(busAddress: String) -> Result<UInt32, MeteredProblem> {
        var bus: OpaquePointer?
        let opened = glasses_sd_bus_open_system(&bus)
        guard opened >= 0, let bus else {
            if let load = glasses_sd_bus_load_error() { return .failure(.noBus(String(cString: load))) }
            return .failure(.noBus("no system bus at \(busAddress) (\(SystemError(errno: -opened, "connect").message))"))
        }
        defer { _ = glasses_sd_bus_flush_close_unref(bus) }
        var message: OpaquePointer?
        let created = glasses_sd_bus_message_new_method_call(bus, &message, "org.freedesktop.NetworkManager",
                                                             "/org/freedesktop/NetworkManager",
                                                             "org.freedesktop.DBus.Properties", "Get")
        guard created >= 0, let message else {
            return .failure(.noBus("the system bus at \(busAddress) refused a message (\(SystemError(errno: -created, "sd_bus").message))"))
        }
        defer { _ = glasses_sd_bus_message_unref(message) }
        // A NetworkManager that is not running is an answer (unknown), not something to start.
        _ = glasses_sd_bus_message_set_auto_start(message, 0)
        var appended = "org.freedesktop.NetworkManager".withCString { glasses_sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) }
        if appended >= 0 {
            appended = "Metered".withCString { glasses_sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) }
        }
        guard appended >= 0 else { return .failure(.noBus("could not build the request (\(SystemError(errno: -appended, "sd_bus").message))")) }
        var error = sd_bus_error()
        defer { glasses_sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let called = glasses_sd_bus_call(bus, message, timeoutMicroseconds, &error, &reply)
        guard called >= 0, let reply else {
            let name = error.name.map { String(cString: $0) } ?? ""
            let text = error.message.map { String(cString: $0) } ?? SystemError(errno: -called, "sd_bus_call").message
            if name.hasSuffix(".ServiceUnknown") || name.hasSuffix(".NameHasNoOwner") {
                return .failure(.noNetworkManager("NetworkManager is not running on the system bus at \(busAddress)"))
            }
            return .failure(.noNetworkManager("NetworkManager did not answer on the system bus at \(busAddress): \(name.isEmpty ? text : name + ": " + text)"))
        }
        defer { _ = glasses_sd_bus_message_unref(reply) }
        var value: UInt32 = 0
        guard glasses_sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "v")), "u") >= 0,
              glasses_sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "u")), &value) >= 0 else {
            return .failure(.noNetworkManager("NetworkManager's Metered property is not a number"))
        }
        return .success(value)
    }
}

/// Why NetworkManager's metered state could not be read.
enum MeteredProblem: Error, Equatable {
    /// No libsystemd, or no system bus to talk to.
    case noBus(String)
    /// A bus, but no NetworkManager answering on it.
    case noNetworkManager(String)

    var text: String {
        switch self {
        case .noBus(let text), .noNetworkManager(let text): return text
        }
    }
}
