/// Watches a running attempt for the ways a server can hold it without finishing it, from samples
/// the engine takes ten times a second:
/// - idle: no byte moved, in either direction, for `idle` seconds;
/// - headers: the response headers were not complete `headers` seconds after the request was sent
///   (a server that answers one header line per second, forever);
/// - slow: fewer than `lowSpeedRate` bytes per second on average over `lowSpeedTime` seconds (a
///   server that trickles a byte every few seconds, or sends bytes that are no part of the
///   exchange, such as an endless chunk extension).
/// The defaults (see `Limits.init`) are documented in requestqueue.h.
public struct TransferWatch: Sendable {
    /// The defaults of requestqueue.h.
    public static let defaultIdleTimeout = 60.0
    public static let defaultLowSpeedRate = 1.0

    /// Limits in seconds and bytes per second; 0 turns a limit off.
    public struct Limits: Equatable, Sendable {
        public var idle: Double
        public var headers: Double
        public var lowSpeedRate: Double
        public var lowSpeedTime: Double

        /// The limits of a request: `headers` defaults to the idle timeout, the low-speed limit to
        /// `defaultLowSpeedRate` bytes per second over the idle timeout (nil: not set by the
        /// caller). A server may thus never be cut sooner for thinking or pausing than the idle
        /// timeout allows; a trickling one ends within one to two idle timeouts.
        public init(idle: Double, headers: Double?, lowSpeed: (rate: Double, time: Double)?) {
            self.idle = idle
            self.headers = headers ?? idle
            lowSpeedRate = lowSpeed?.rate ?? TransferWatch.defaultLowSpeedRate
            lowSpeedTime = lowSpeed?.time ?? idle
        }
    }

    public enum Stall: Equatable, Sendable {
        case idle
        case headers
        case slow
    }

    /// What the engine sees of an attempt at one instant.
    public struct Sample: Sendable {
        /// Bytes moved so far in both directions (never decreasing): any byte is activity.
        public var moved: Int64
        /// Of those, the bytes of the exchange itself (header lines once complete, bodies as
        /// received, both ways), not the framing around them such as chunk extensions (never
        /// decreasing): what the low-speed limit measures, so that bytes that are neither cannot
        /// hold a transfer. Nil: `moved`.
        public var counted: Int64
        /// The request has not been sent yet (still resolving, connecting, handshaking).
        public var connecting: Bool
        /// The request body moved since the previous sample (the server is still reading it).
        public var uploading: Bool
        /// The headers of the response being received are not complete.
        public var awaitingHeaders: Bool
        /// The transfer is paused by the library itself (the delivery is catching up).
        public var paused: Bool

        public init(moved: Int64, connecting: Bool, uploading: Bool, awaitingHeaders: Bool, paused: Bool,
                    counted: Int64? = nil) {
            self.moved = moved
            self.counted = counted ?? moved
            self.connecting = connecting
            self.uploading = uploading
            self.awaitingHeaders = awaitingHeaders
            self.paused = paused
        }
    }

    public let limits: Limits
    private var moved: Int64 = -1
    private var lastActivity: Double
    /// When the wait for the current response's headers began; nil when not waiting.
    private var headersSince: Double?
    /// The low-speed window: when it began and the bytes moved then.
    private var windowStart: Double
    private var windowBase: Int64 = 0

    public init(limits: Limits, now: Double) {
        self.limits = limits
        lastActivity = now
        windowStart = now
        headersSince = now
    }

    /// Takes a sample; returns the limit the attempt broke, if any.
    public mutating func check(now: Double, _ s: Sample) -> Stall? {
        if s.moved != moved {
            moved = s.moved
            lastActivity = now
        }
        if s.paused {
            // Held by us, not by the server: no limit runs.
            lastActivity = now
            windowStart = now
            windowBase = s.counted
            headersSince = s.awaitingHeaders ? now : nil
            return nil
        }
        if s.connecting {
            windowStart = now
            windowBase = s.counted
        }
        if !s.awaitingHeaders {
            headersSince = nil
        } else if headersSince == nil || s.connecting || s.uploading {
            headersSince = now
        }
        if limits.idle > 0, now - lastActivity >= limits.idle { return .idle }
        if limits.headers > 0, let since = headersSince, now - since >= limits.headers { return .headers }
        if limits.lowSpeedRate > 0, limits.lowSpeedTime > 0, now - windowStart >= limits.lowSpeedTime {
            if Double(s.counted - windowBase) < limits.lowSpeedRate * limits.lowSpeedTime { return .slow }
            windowStart = now
            windowBase = s.counted
        }
        return nil
    }

    /// The completion message of a broken limit.
    public func message(_ stall: Stall) -> String {
        switch stall {
        case .idle: "no data received or sent for \(limits.idle) seconds"
        case .headers: "the response headers were not complete \(limits.headers) seconds after the request was sent"
        case .slow: "less than \(limits.lowSpeedRate) bytes per second received or sent over \(limits.lowSpeedTime) seconds"
        }
    }
}
