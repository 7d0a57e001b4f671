// The C boundary of transport settings, queue defaults and cookies (see "Transport settings" in
// include/requestqueue.h). Checks its input and forwards to Transport.swift.
import CRequestQueueAPI
import Glibc
import RequestQueueCore

/// A request that `rq_request_start` may start: not a queue's defaults.
func startableRequest(_ pointer: OpaquePointer?, function: StaticString = #function) -> (Request?, rq_result) {
    let (r, result) = request(pointer, function: function)
    guard let r else { return (nil, result) }
    guard !r.isDefaults else {
        return (nil, fail(RQ_ERR_INVALID_STATE, "the request is a queue's defaults (rq_queue_get_defaults): it is never started",
                          function: function))
    }
    return (r, RQ_OK)
}

/// The header's names of the transport options, by value (rq_option), for messages.
private let optionNames = [
    "", "RQ_OPTION_DECODE_CONTENT", "RQ_OPTION_USER_AGENT", "RQ_OPTION_PROXY", "RQ_OPTION_NO_PROXY",
    "RQ_OPTION_CLIENT_CERT", "RQ_OPTION_CLIENT_KEY", "RQ_OPTION_KEY_PASSWORD", "RQ_OPTION_PINNED_PUBLIC_KEY",
    "RQ_OPTION_CA_DIRECTORY", "RQ_OPTION_TLS_MIN_VERSION", "RQ_OPTION_UNSAFE_NO_TLS_VERIFY", "RQ_OPTION_UNIX_SOCKET",
    "RQ_OPTION_RESOLVE", "RQ_OPTION_INTERFACE", "RQ_OPTION_IP_VERSION", "RQ_OPTION_TCP_KEEPALIVE",
    "RQ_OPTION_MAX_RECV_SPEED", "RQ_OPTION_MAX_SEND_SPEED", "RQ_OPTION_HTTP_VERSION", "RQ_OPTION_COOKIES",
    "RQ_OPTION_PROXY_CA_FILE",
]

/// RQ_ERR_INVALID_ARGUMENT for a transport option's value.
private func badOption(_ option: rq_option, _ why: String, function: StaticString) -> rq_result {
    let value = Int(option.rawValue)
    let name = value > 0 && value < optionNames.count ? optionNames[value] : "option \(value)"
    return fail(RQ_ERR_INVALID_ARGUMENT, "\(name): \(why)", function: function)
}

@c @implementation public func rq_request_set_option_string(_ pointer: OpaquePointer?, _ option: rq_option, _ value: UnsafePointer<CChar>?) -> rq_result {
    let function: StaticString = #function
    let bytes = cStringBytes(value).map(Array.init)
    return configure(pointer) { r in
        var t = r.transport
        func set(_ field: WritableKeyPath<TransportSettings, [UInt8]?>, _ rule: String, valid: ([UInt8]) -> Bool) -> rq_result {
            if let bytes, !valid(bytes) { return badOption(option, "the value is not \(rule)", function: function) }
            t[keyPath: field] = bytes
            return RQ_OK
        }
        let path = "a path of 1 to 4096 bytes"
        let result: rq_result
        switch option {
        case RQ_OPTION_USER_AGENT:
            result = set(\.userAgent, "a header value (no CR, LF or NUL; at most 65536 bytes)") {
                (try? Validation.headerValue($0)) != nil
            }
        case RQ_OPTION_PROXY:
            result = set(\.proxy, "a proxy URL (http, https, socks4, socks4a, socks5 or socks5h://[user:password@]host[:port], "
                         + "printable ASCII without spaces) or \"\" for none", valid: TransportValidation.proxy)
        case RQ_OPTION_NO_PROXY:
            result = set(\.noProxy, "a list of hosts (printable ASCII, at most 65536 bytes)", valid: TransportValidation.hostList)
        case RQ_OPTION_PROXY_CA_FILE: result = set(\.proxyCAFile, path, valid: TransportValidation.path)
        case RQ_OPTION_CLIENT_CERT: result = set(\.clientCertificate, path, valid: TransportValidation.path)
        case RQ_OPTION_CLIENT_KEY: result = set(\.clientKey, path, valid: TransportValidation.path)
        case RQ_OPTION_KEY_PASSWORD: result = set(\.keyPassword, "at most 4096 bytes") { $0.count <= 4096 }
        case RQ_OPTION_PINNED_PUBLIC_KEY: result = set(\.pinnedPublicKey, "\"sha256//<base64>\" or \(path)", valid: TransportValidation.path)
        case RQ_OPTION_CA_DIRECTORY: result = set(\.caDirectory, path, valid: TransportValidation.path)
        case RQ_OPTION_UNIX_SOCKET:
            // sockaddr_un's sun_path holds 107 bytes and the NUL.
            result = set(\.unixSocket, "a path of 1 to 107 bytes") { !$0.isEmpty && $0.count <= 107 }
        case RQ_OPTION_INTERFACE:
            result = set(\.interface, "an interface name, address or host name (1 to 255 printable ASCII bytes, no spaces)") {
                TransportValidation.isToken($0) && $0.count <= 255
            }
        case RQ_OPTION_RESOLVE:
            guard let bytes else {
                t.resolve = nil
                result = RQ_OK
                break
            }
            guard TransportValidation.resolveEntry(bytes) else {
                return badOption(option, "a resolve entry is \"host:port:address\"", function: function)
            }
            guard (t.resolve?.count ?? 0) < 1000 else { return badOption(option, "at most 1000 resolve entries", function: function) }
            t.resolve = (t.resolve ?? []) + [bytes]
            result = RQ_OK
        default:
            result = badOption(option, "not an option that takes a string", function: function)
        }
        if result == RQ_OK { r.transport = t }
        return result
    }
}

@c @implementation public func rq_request_set_option_int(_ pointer: OpaquePointer?, _ option: rq_option, _ value: Int64) -> rq_result {
    let function: StaticString = #function
    return configure(pointer) { r in
        func bad(_ why: String) -> rq_result { badOption(option, "\(value) is not \(why)", function: function) }
        switch option {
        case RQ_OPTION_DECODE_CONTENT: r.transport.decodeContent = value != 0
        case RQ_OPTION_UNSAFE_NO_TLS_VERIFY: r.transport.verifyTLS = value == 0
        case RQ_OPTION_COOKIES: r.transport.cookies = value != 0
        case RQ_OPTION_TLS_MIN_VERSION:
            guard value == 0 || TLSVersion(rawValue: Int(clamping: value)) != nil else { return bad("a TLS version of the header") }
            r.transport.tlsMinVersion = value == 0 ? nil : TLSVersion(rawValue: Int(clamping: value))
        case RQ_OPTION_IP_VERSION:
            guard let version = IPVersion(rawValue: Int(clamping: value)) else { return bad("an IP version of the header") }
            r.transport.ipVersion = version
        case RQ_OPTION_HTTP_VERSION:
            guard let version = HTTPVersion(rawValue: Int(clamping: value)) else { return bad("an HTTP version of the header") }
            r.transport.httpVersion = version
        case RQ_OPTION_TCP_KEEPALIVE:
            guard (0...86400).contains(value) else { return bad("a number of seconds from 0 to 86400") }
            r.transport.tcpKeepAlive = Int(value)
        case RQ_OPTION_MAX_RECV_SPEED:
            guard value >= 0 else { return bad("a number of bytes per second >= 0") }
            r.transport.maxReceiveSpeed = value
        case RQ_OPTION_MAX_SEND_SPEED:
            guard value >= 0 else { return bad("a number of bytes per second >= 0") }
            r.transport.maxSendSpeed = value
        default:
            return badOption(option, "not an option that takes a number", function: function)
        }
        return RQ_OK
    }
}

@c @implementation public func rq_queue_get_defaults(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<OpaquePointer?>?) -> rq_result {
    let (q, result) = queue(pointer)
    guard let q else { return result }
    guard let out else { return null("out") }
    guard q.kind != .standalone else { return fail(RQ_ERR_INVALID_HANDLE, "not a queue of rq_queue_new or rq_queue_default") }
    guard let d = q.transport.defaults() else { return fail(RQ_ERR_QUEUE_CLOSED, standardReason(RQ_ERR_QUEUE_CLOSED)) }
    out.pointee = d.pointer
    return RQ_OK
}

@c @implementation public func rq_response_http_version(_ pointer: OpaquePointer?) -> Int32 {
    response(pointer)?.httpVersion ?? 0
}

@c @implementation public func rq_queue_set_max_connections(_ pointer: OpaquePointer?, _ total: Int, _ perHost: Int) -> rq_result {
    let (q, result) = queue(pointer)
    guard let q else { return result }
    let total = UInt(bitPattern: total), perHost = UInt(bitPattern: perHost)
    guard total <= 100_000 else { return outOfRange("total", total, "from 0 to 100000") }
    guard perHost <= 100_000 else { return outOfRange("per_host", perHost, "from 0 to 100000") }
    q.transport.setConnectionLimits(total: Int(total), perHost: Int(perHost))
    return RQ_OK
}

@c @implementation public func rq_queue_get_max_connections(_ pointer: OpaquePointer?, _ outTotal: UnsafeMutablePointer<Int>?,
                                                            _ outPerHost: UnsafeMutablePointer<Int>?) -> rq_result {
    let (q, result) = queue(pointer)
    guard let q else { return result }
    guard let outTotal else { return null("out_total") }
    guard let outPerHost else { return null("out_per_host") }
    let limits = q.transport.currentConnectionLimits
    outTotal.pointee = limits.total
    outPerHost.pointee = limits.perHost
    return RQ_OK
}

// MARK: Cookies

private func withJar(_ pointer: OpaquePointer?, function: StaticString = #function, _ body: (CookieJar) -> rq_result) -> rq_result {
    let (q, result) = queue(pointer, function: function)
    guard let q else { return result }
    guard let jar = q.transport.cookieJar() else {
        return fail(RQ_ERR_QUEUE_CLOSED, standardReason(RQ_ERR_QUEUE_CLOSED), function: function)
    }
    return body(jar)
}

@c @implementation public func rq_queue_cookies_list(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> rq_result {
    withJar(pointer) { jar in
        guard let out else { return null("out") }
        guard let text = jar.list(), let raw = malloc(text.count + 1) else {
            return fail(RQ_ERR_OUT_OF_MEMORY, "no memory for the list of cookies")
        }
        let bytes = raw.assumingMemoryBound(to: UInt8.self)
        text.withUnsafeBufferPointer { if let base = $0.baseAddress { bytes.update(from: base, count: text.count) } }
        bytes[text.count] = 0
        out.pointee = raw.assumingMemoryBound(to: CChar.self)
        return RQ_OK
    }
}

@c @implementation public func rq_string_free(_ text: UnsafeMutablePointer<CChar>?) { free(text) }

@c @implementation public func rq_queue_cookies_clear(_ pointer: OpaquePointer?) -> rq_result {
    withJar(pointer) { jar in jar.clear(); return RQ_OK }
}

@c @implementation public func rq_queue_cookies_load(_ pointer: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> rq_result {
    withJar(pointer) { jar in
        guard let path else { return null("path") }
        return jar.load(path) ? RQ_OK : fail(RQ_ERR_SYSTEM, "cannot read the cookie file \(String(cString: path))")
    }
}

@c @implementation public func rq_queue_cookies_save(_ pointer: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> rq_result {
    withJar(pointer) { jar in
        guard let path else { return null("path") }
        return jar.save(path) ? RQ_OK : fail(RQ_ERR_SYSTEM, "cannot write the cookie file \(String(cString: path))")
    }
}
