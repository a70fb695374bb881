package wire

// Error codes of the JSON error body. Clients branch on the code; the
// message is for people.
const (
	CodeBadRequest          = "bad_request"           // 400: unparseable body, unknown field, wrong type, bad path
	CodeUnauthorized        = "unauthorized"          // 401: missing or wrong bearer token
	CodeForbidden           = "forbidden"             // 403: Host header refused (no-auth mode)
	CodeNotFound            = "not_found"             // 404: unknown job, file or route
	CodeMethodNotAllowed    = "method_not_allowed"    // 405
	CodeNotEnded            = "not_ended"             // 409: results asked for while the job runs
	CodeAlreadyEnded        = "already_ended"         // 409: cancel of an ended job
	CodeNoSandbox           = "no_sandbox"            // 409: desktop or Jupyter of a job without a running sandbox
	CodeDeleted             = "deleted"               // 410: files or artifacts of a job whose data was removed
	CodeTooLarge            = "body_too_large"        // 413
	CodeRequestTimeout      = "request_timeout"       // 408: a request body that came too slowly (AGENTBOX_HTTP_BODY_TIMEOUT, AGENTBOX_HTTP_MIN_UPLOAD_RATE)
	CodeOverCeiling         = "over_ceiling"          // 400: a limit over the operator's ceiling for it
	CodeImageNotAllowed     = "image_not_allowed"     // 400: an image the operator does not allow (AGENTBOX_IMAGES)
	CodeIsolation           = "isolation_unavailable" // 400: an isolation tier that is no tier or cannot run here
	CodeNoModel             = "no_model"              // 400: an agent job on a server with no model configured
	CodeValidation          = "validation_failed"     // 422: well-formed request with invalid values
	CodeIdempotencyConflict = "idempotency_conflict"  // 422: Idempotency-Key reused with another body
	CodeInternal            = "internal"              // 500
	CodeBadGateway          = "bad_gateway"           // 502: the job's sandbox did not answer the proxy
	CodeUnavailable         = "unavailable"           // 503: too many event streams; a sandbox service that cannot start
)

// MessageNoSuchJob is the message of a 404 about a job that does not
// exist (not a file of one, nor a route); the CLI repeats the ID it asked
// for ("no job job_… on http://…").
const MessageNoSuchJob = "no such job"
