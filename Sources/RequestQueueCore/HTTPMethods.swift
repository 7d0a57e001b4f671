/// The lists of HTTP methods the library treats apart, each written here only. The header
/// (include/requestqueue.h) names them in words; HeaderAgreementTests checks that it names the same.
public enum HTTPMethods {
    /// Idempotent in RFC 9110 (sending twice does no more than once): retried without
    /// `rq_request_set_retry_non_idempotent`.
    public static let idempotent: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]
    /// Safe methods whose equal requests share one transfer under RQ_DUPLICATES_COALESCE.
    public static let coalescable: Set<String> = ["GET", "HEAD", "OPTIONS"]
    /// Methods that send a body, empty when none was set (libcurl is told its size, 0).
    public static let sendingBody: Set<String> = ["POST", "PUT", "PATCH"]
    /// Methods whose 303 redirect libcurl follows as RFC 9110 says (POST turned into GET, GET and
    /// HEAD kept); a 303 answering any other method is delivered, not followed.
    public static let seeOtherFollowed: Set<String> = ["GET", "HEAD", "POST"]
}
