// The C boundary of streaming (see "Streaming" in include/requestqueue.h): thin forwarders that
// check their input and never trap on it.
import CRequestQueueAPI
import Glibc

@c @implementation public func rq_request_set_body_callback(_ pointer: OpaquePointer?, _ fn: rq_data_fn?) -> rq_result {
    configure(pointer) { r in
        guard let fn else {
            r.bodyCallback = nil
            return RQ_OK
        }
        guard r.outputPath == nil else {
            return fail(RQ_ERR_INVALID_STATE, "an output file is set (rq_request_set_output_file): a body goes to one place")
        }
        r.bodyCallback = fn
        if r.flow == nil { r.flow = StreamFlow() }
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_output_file(_ pointer: OpaquePointer?, _ path: UnsafePointer<CChar>?, _ resume: Int32) -> rq_result {
    configure(pointer) { r in
        guard let path else {
            r.outputPath = nil
            r.outputResume = false
            return RQ_OK
        }
        guard path.pointee != 0 else { return fail(RQ_ERR_INVALID_ARGUMENT, "the path is empty") }
        guard r.bodyCallback == nil else {
            return fail(RQ_ERR_INVALID_STATE, "a body callback is set (rq_request_set_body_callback): a body goes to one place")
        }
        r.outputPath = Array(UnsafeBufferPointer(start: path, count: strlen(path) + 1))
        r.outputResume = resume != 0
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_head_callback(_ pointer: OpaquePointer?, _ fn: rq_head_fn?) -> rq_result {
    configure(pointer) { r in
        r.headCallback = fn
        return RQ_OK
    }
}
