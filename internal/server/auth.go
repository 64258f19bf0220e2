package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/grpc/metadata"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/store"
)

// This file is the one home of authentication and authorization: the role
// table, the token check both stacks' interceptors run, the queue check the
// interceptors and the handlers share, the audit line, and how log lines
// show idempotency keys.
//
// A job on a queue the caller's token may not touch is answered as a job
// that does not exist (hiddenJob): a different answer would tell the token
// which ids exist on other queues. The audit line records the refusal.

// callRoles lists, for every RPC, the roles besides admin that may call it.
// Admin may call everything; an RPC of a Sepp service missing here is for
// admin only, so a method added later is closed until it is listed.
var callRoles = map[string][]string{
	seppv1connect.JobServiceEnqueueProcedure:               {config.RoleProducer},
	seppv1connect.JobServiceEnqueueBatchProcedure:          {config.RoleProducer},
	seppv1connect.JobServiceGetJobProcedure:                {config.RoleProducer, config.RoleReader},
	seppv1connect.JobServiceLookupIdempotencyKeyProcedure:  {config.RoleProducer, config.RoleReader},
	seppv1connect.JobServiceCancelJobProcedure:             nil,
	seppv1connect.JobServiceReleaseIdempotencyKeyProcedure: nil,

	seppv1connect.WorkerServiceReserveProcedure:       {config.RoleWorker},
	seppv1connect.WorkerServiceCompleteProcedure:      {config.RoleWorker},
	seppv1connect.WorkerServiceCompleteBatchProcedure: {config.RoleWorker},
	seppv1connect.WorkerServiceFailProcedure:          {config.RoleWorker},
	seppv1connect.WorkerServiceExtendLeaseProcedure:   {config.RoleWorker},

	seppv1connect.EffectServiceClaimEffectProcedure:       {config.RoleWorker},
	seppv1connect.EffectServiceCompleteEffectProcedure:    {config.RoleWorker},
	seppv1connect.EffectServiceReleaseEffectProcedure:     {config.RoleWorker},
	seppv1connect.EffectServiceExtendEffectLeaseProcedure: {config.RoleWorker},
	seppv1connect.EffectServiceGetEffectProcedure:         {config.RoleWorker},

	seppv1connect.AdminServiceListQueuesProcedure:      {config.RoleReader},
	seppv1connect.AdminServiceListJobsProcedure:        {config.RoleReader},
	seppv1connect.AdminServiceListOutboxesProcedure:    {config.RoleReader},
	seppv1connect.AdminServiceListSchedulesProcedure:   {config.RoleReader},
	seppv1connect.AdminServiceCreateBackupProcedure:    nil,
	seppv1connect.AdminServiceReadBackupFileProcedure:  nil,
	seppv1connect.AdminServiceDeleteBackupProcedure:    nil,
	seppv1connect.AdminServiceRequeueDeadJobsProcedure: nil,
	seppv1connect.AdminServicePurgeDeadJobsProcedure:   nil,
	seppv1connect.AdminServicePauseQueueProcedure:      nil,
	seppv1connect.AdminServiceResumeQueueProcedure:     nil,
}

// rolesFor returns the roles that may call procedure
// ("/sepp.v1.JobService/Enqueue"), admin last; nil for a procedure outside
// Sepp's services (health, reflection), which needs no token.
func rolesFor(procedure string) []string {
	if !guarded(procedure) {
		return nil
	}
	return append(slices.Clone(callRoles[procedure]), config.RoleAdmin)
}

// guarded reports whether procedure belongs to one of Sepp's services.
func guarded(procedure string) bool {
	for _, svc := range serviceNames {
		if strings.HasPrefix(procedure, "/"+svc+"/") {
			return true
		}
	}
	return false
}

// audited reports whether a call of procedure gets an audit line: every
// AdminService RPC but the reads (a backup's file reads among them: its
// CreateBackup and DeleteBackup are audited), CancelJob and
// ReleaseIdempotencyKey.
func audited(procedure string) bool {
	switch procedure {
	case seppv1connect.AdminServiceListQueuesProcedure, seppv1connect.AdminServiceListJobsProcedure, seppv1connect.AdminServiceListOutboxesProcedure,
		seppv1connect.AdminServiceListSchedulesProcedure, seppv1connect.AdminServiceReadBackupFileProcedure:
		return false
	case seppv1connect.JobServiceCancelJobProcedure, seppv1connect.JobServiceReleaseIdempotencyKeyProcedure:
		return true
	}
	return strings.HasPrefix(procedure, "/"+seppv1connect.AdminServiceName+"/")
}

// token is one [[auth.tokens]] entry with its secret's SHA-256 read.
type token struct {
	config.TokenConfig
	hash [sha256.Size]byte
}

// principalKey is the context key of the calling token (*token).
type principalKey struct{}

// principal returns the token that made the call ctx belongs to, or nil:
// authentication is off, or the call did not come through an interceptor
// (a webhook's enqueue).
func principal(ctx context.Context) *token {
	t, _ := ctx.Value(principalKey{}).(*token)
	return t
}

// loadTokens reads the secret of every [[auth.tokens]] entry.
func loadTokens(cfg *config.Config) ([]*token, error) {
	var out []*token
	seen := map[[sha256.Size]byte]string{}
	for _, tc := range cfg.Auth.Tokens {
		t := &token{TokenConfig: tc}
		switch {
		case tc.SecretSHA256 != "":
			b, err := hex.DecodeString(tc.SecretSHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("token %q: secret_sha256 must be 64 hex digits", tc.Name)
			}
			copy(t.hash[:], b)
		case tc.SecretEnv != "":
			v := os.Getenv(tc.SecretEnv)
			if v == "" {
				return nil, fmt.Errorf("token %q: the environment variable %s, which secret_env names, is not set or empty: set it to the token's secret, or give its SHA-256 in secret_sha256", tc.Name, tc.SecretEnv)
			}
			t.hash = sha256.Sum256([]byte(v))
		case tc.SecretFile != "":
			b, err := os.ReadFile(tc.SecretFile)
			if err != nil {
				return nil, fmt.Errorf("token %q: cannot read secret_file %s: %v; make the file readable by sepp, or give the secret's SHA-256 in secret_sha256", tc.Name, tc.SecretFile, errText(err))
			}
			b = trimNewline(b)
			if len(b) == 0 {
				return nil, fmt.Errorf("token %q: secret_file %s is empty: write the token's secret into it", tc.Name, tc.SecretFile)
			}
			t.hash = sha256.Sum256(b)
		default:
			return nil, fmt.Errorf("token %q: names no secret: set secret_sha256, secret_env or secret_file", tc.Name)
		}
		if other, dup := seen[t.hash]; dup {
			return nil, fmt.Errorf("tokens %q and %q have the same secret, so a call with it could not be told apart: give each token its own (sepp token create)", other, tc.Name)
		}
		seen[t.hash] = tc.Name
		out = append(out, t)
	}
	return out, nil
}

// logAuth says at start whether calls need a token, and warns when the
// port is open beyond loopback without one.
func (s *Server) logAuth() {
	switch {
	case len(s.tokens) > 0:
		names := make([]string, len(s.tokens))
		for i, t := range s.tokens {
			names[i] = t.Name
		}
		s.log.Info("auth on: every API call needs a token", "tokens", strings.Join(names, ","),
			"metrics_token_role", s.cfg.Auth.MetricsTokenRole)
	case !config.IsLoopback(s.cfg.Server.Listen):
		s.log.Warn("auth off beyond loopback (allow_unauthenticated = true): anyone who can reach the port can call everything",
			"listen", s.cfg.Server.Listen)
	}
}

// CheckAuthSecrets reads every token's secret as the server does at start,
// for sepp serve --check-config; the error is the one the server would stop
// with.
func CheckAuthSecrets(cfg *config.Config) error {
	_, err := loadTokens(cfg)
	return err
}

// howToSend ends every UNAUTHENTICATED message.
const howToSend = "send a token as the header Authorization: Bearer <secret> (gRPC: the metadata key authorization; the sepp CLI: --token or SEPP_TOKEN)"

// bearer returns the secret of an "Authorization: Bearer <secret>" value.
func bearer(header string) (string, bool) {
	scheme, secret, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	secret = strings.TrimSpace(secret)
	return secret, secret != ""
}

// identify returns the token whose secret is the one in the Authorization
// header value, or an UNAUTHENTICATED error. Every token is compared, in
// constant time, so the time taken says nothing about which one nearly
// matched.
func (s *Server) identify(header string) (*token, *apiError) {
	if header == "" {
		return nil, newError(connect.CodeUnauthenticated, ReasonUnauthenticated, "this server requires a token and the call carries none: %s", howToSend)
	}
	secret, ok := bearer(header)
	if !ok {
		return nil, newError(connect.CodeUnauthenticated, ReasonUnauthenticated, "the authorization header is not of the form \"Bearer <secret>\": %s", howToSend)
	}
	h := sha256.Sum256([]byte(secret))
	found := -1
	for i, t := range s.tokens {
		eq := subtle.ConstantTimeCompare(h[:], t.hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil, newError(connect.CodeUnauthenticated, ReasonUnauthenticated, "the token matches none of this server's [[auth.tokens]] (mistyped, or revoked): %s", howToSend)
	}
	return s.tokens[found], nil
}

// authorize runs before every call: with authentication on, it finds the
// caller's token from the Authorization header value, checks its roles for
// procedure and the queues req names, and returns ctx carrying the token.
func (s *Server) authorize(ctx context.Context, procedure string, header func() string, req any) (context.Context, *apiError) {
	if len(s.tokens) == 0 || !guarded(procedure) {
		return ctx, nil
	}
	t, aerr := s.identify(header())
	if aerr != nil {
		return ctx, aerr
	}
	ctx = context.WithValue(ctx, principalKey{}, t)
	roles := rolesFor(procedure)
	if !slices.ContainsFunc(roles, t.HasRole) {
		e := newError(connect.CodePermissionDenied, ReasonPermissionDenied,
			"token %q (roles %s) may not call %s: that needs a token with the role %s",
			t.Name, strings.Join(t.Roles, ", "), strings.TrimPrefix(procedure, "/"), orList(roles))
		e.metadata = map[string]string{"token": t.Name, "roles": strings.Join(roles, ",")}
		return ctx, e
	}
	if aerr := s.checkRequestQueues(ctx, req); aerr != nil {
		return ctx, aerr
	}
	return ctx, nil
}

// guard runs call, the handler, for both stacks' interceptors: authorize
// first, then the audit line of an audited call, however it ended, with
// the handler's auditNotes. header returns the call's Authorization value;
// it is read only when [auth] has tokens.
func guard[R any](s *Server, ctx context.Context, procedure string, header func() string, req any, call func(context.Context) (R, error)) (res R, err error) {
	ctx, aerr := s.authorize(ctx, procedure, header, req)
	if aerr != nil {
		s.audit(ctx, procedure, req, aerr)
		return res, aerr
	}
	if !audited(procedure) {
		return call(ctx)
	}
	ctx = context.WithValue(ctx, auditNotesKey{}, &auditNotes{})
	returned := false
	defer func() {
		if !returned { // the handler panicked; the interceptor's recoverPanic answers
			s.audit(ctx, procedure, req, errors.New("the handler panicked"))
		}
	}()
	res, err = call(ctx)
	returned = true
	s.audit(ctx, procedure, req, err)
	return res, err
}

// grpcAuthorization returns the authorization metadata of a gRPC call
// (without copying the call's whole metadata, as FromIncomingContext does).
func grpcAuthorization(ctx context.Context) func() string {
	return func() string {
		if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

// checkRequestQueues checks the queues a request names against the
// caller's token. GetJob, CancelJob and the dead-job selectors by id check
// the job's queue in their handlers, which read the job; ListQueues filters
// its answer.
func (s *Server) checkRequestQueues(ctx context.Context, req any) *apiError {
	t := principal(ctx)
	if t == nil || len(t.Queues) == 0 {
		return nil
	}
	var queues []string
	switch r := req.(type) {
	case *seppv1.EnqueueRequest:
		queues = []string{r.GetQueue()}
	case *seppv1.EnqueueBatchRequest:
		for i, j := range r.GetJobs() {
			if aerr := allowQueue(t, j.GetQueue()); aerr != nil {
				return aerr.atIndex(i)
			}
		}
	case *seppv1.ReserveRequest:
		queues = r.GetQueues()
	case *seppv1.LookupIdempotencyKeyRequest:
		queues = []string{r.GetQueue()}
	case *seppv1.ReleaseIdempotencyKeyRequest:
		queues = []string{r.GetQueue()}
	case *seppv1.ListJobsRequest:
		if r.GetQueue() == "" {
			return limitedError(t, "list the jobs of every queue", "name one of its queues in queue")
		}
		queues = []string{r.GetQueue()}
	case *seppv1.RequeueDeadJobsRequest:
		return checkDeadSelection(t, r.GetQueue(), r.GetJobIds(), r.GetAll())
	case *seppv1.PurgeDeadJobsRequest:
		return checkDeadSelection(t, r.GetQueue(), r.GetJobIds(), r.GetAll())
	case *seppv1.CreateBackupRequest, *seppv1.ReadBackupFileRequest, *seppv1.DeleteBackupRequest:
		return limitedError(t, "copy the store, which holds every queue", "use an admin token that is not limited to some queues")
	case *seppv1.PauseQueueRequest:
		queues = []string{r.GetQueue()}
	case *seppv1.ResumeQueueRequest:
		queues = []string{r.GetQueue()}
	}
	for _, q := range queues {
		if aerr := allowQueue(t, q); aerr != nil {
			return aerr
		}
	}
	return nil
}

// checkDeadSelection checks a dead-job selector before the handler runs:
// a token limited to some queues may not name another queue, nor select
// every queue's dead jobs. Selected by id, each job's queue is checked by
// the handler.
func checkDeadSelection(t *token, queue string, ids []string, all bool) *apiError {
	switch {
	case queue != "":
		return allowQueue(t, queue)
	case len(ids) > 0:
		return nil
	case all:
		return limitedError(t, "select the dead jobs of every queue (all = true)", "name one of its queues in queue")
	}
	return nil
}

func limitedError(t *token, what, instead string) *apiError {
	return newError(connect.CodePermissionDenied, ReasonPermissionDenied,
		"token %q may only touch the queues %s, so it may not %s: %s", t.Name, strings.Join(t.Queues, ", "), what, instead)
}

// allowQueue refuses queue unless t may touch it; a nil t (no
// authentication) may touch every queue.
func allowQueue(t *token, queue string) *apiError {
	if t == nil || t.AllowsQueue(queue) {
		return nil
	}
	e := newError(connect.CodePermissionDenied, ReasonPermissionDenied,
		"token %q may not touch queue %q: its queues are %s; use a token whose queues include it", t.Name, queue, strings.Join(t.Queues, ", "))
	e.metadata = map[string]string{"token": t.Name, "queue": queue}
	return e
}

// hiddenJob is the error of a call on a job whose queue the caller's token
// may not touch. It wraps store.ErrJobNotFound, so the caller gets
// JOB_NOT_FOUND, word for word the answer for an id no job has; the audit
// line says PERMISSION_DENIED and names the queue.
type hiddenJob struct{ queue string }

func (e *hiddenJob) Error() string {
	return fmt.Sprintf("the job is on queue %q, which the token may not touch", e.queue)
}

func (e *hiddenJob) Unwrap() error { return store.ErrJobNotFound }

// hideJob returns a *hiddenJob unless the caller of ctx may touch queue,
// the queue of a job a handler has read.
func hideJob(ctx context.Context, queue string) error {
	if t := principal(ctx); t != nil && !t.AllowsQueue(queue) {
		return &hiddenJob{queue: queue}
	}
	return nil
}

// mayListQueue reports whether the caller of ctx may see queue in ListQueues.
func mayListQueue(ctx context.Context, queue string) bool {
	t := principal(ctx)
	return t == nil || t.AllowsQueue(queue)
}

func orList(roles []string) string {
	if len(roles) < 2 {
		return strings.Join(roles, "")
	}
	return strings.Join(roles[:len(roles)-1], ", ") + " or " + roles[len(roles)-1]
}

// audit logs one line for an audited call (audited): the token, the call,
// its target and how it ended. It runs after the handler, and for calls
// refused before it.
func (s *Server) audit(ctx context.Context, procedure string, req any, err error) {
	if !audited(procedure) {
		return
	}
	name := "-"
	if t := principal(ctx); t != nil {
		name = t.Name
	} else if len(s.tokens) > 0 {
		name = "(unauthenticated)"
	}
	attrs := []slog.Attr{slog.String("token", name), slog.String("call", strings.TrimPrefix(procedure, "/"))}
	switch r := req.(type) {
	case *seppv1.CancelJobRequest:
		attrs = append(attrs, slog.String("job_id", r.GetJobId()))
	case *seppv1.ReleaseIdempotencyKeyRequest:
		attrs = append(attrs, slog.String("queue", r.GetQueue()), s.keyAttr(r.GetIdempotencyKey()))
	case *seppv1.RequeueDeadJobsRequest:
		attrs = append(attrs, deadTarget(r.GetQueue(), r.GetJobIds(), r.GetAll())...)
	case *seppv1.PurgeDeadJobsRequest:
		attrs = append(attrs, deadTarget(r.GetQueue(), r.GetJobIds(), r.GetAll())...)
	case *seppv1.PauseQueueRequest:
		attrs = append(attrs, slog.String("queue", r.GetQueue()))
	case *seppv1.ResumeQueueRequest:
		attrs = append(attrs, slog.String("queue", r.GetQueue()))
	}
	outcome := "ok"
	var hidden *hiddenJob
	var ce *connect.Error
	switch {
	case errors.As(err, &hidden):
		outcome = ReasonPermissionDenied
	case errors.As(err, &ce):
		outcome = ce.Code().String()
	case err != nil:
		outcome = toAPIError(err).reason
	}
	attrs = append(attrs, slog.String("outcome", outcome))
	if hidden != nil { // what the caller was told instead
		attrs = append(attrs, slog.String("job_queue", hidden.queue), slog.String("answered", ReasonJobNotFound))
	}
	if n, ok := ctx.Value(auditNotesKey{}).(*auditNotes); ok {
		attrs = append(attrs, n.attrs...)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "audit", attrs...)
}

// auditNotesKey is the context key of an audited call's *auditNotes.
type auditNotesKey struct{}

// auditNotes are what a handler adds to its call's audit line (auditNote).
// Only the call's own goroutine touches them.
type auditNotes struct{ attrs []slog.Attr }

// auditNote adds attrs to the audit line of the call of ctx; a call that is
// not audited has none.
func auditNote(ctx context.Context, attrs ...slog.Attr) {
	if n, ok := ctx.Value(auditNotesKey{}).(*auditNotes); ok {
		n.attrs = append(n.attrs, attrs...)
	}
}

func deadTarget(queue string, ids []string, all bool) []slog.Attr {
	a := []slog.Attr{slog.String("queue", queue)}
	if len(ids) > 0 {
		a = append(a, slog.String("job_ids", strings.Join(ids, ",")))
	}
	if all {
		a = append(a, slog.Bool("all", true))
	}
	return a
}

// keyAttr is an idempotency key as [server] log_keys says log lines show
// it: in full, as "sha256:" and 16 hex digits, or not at all (an empty
// attribute, which slog drops).
func (s *Server) keyAttr(key string) slog.Attr {
	switch s.cfg.Server.LogKeys {
	case config.LogKeysNone:
		return slog.Attr{}
	case config.LogKeysHash:
		h := sha256.Sum256([]byte(key))
		return slog.String("idempotency_key", "sha256:"+hex.EncodeToString(h[:8]))
	}
	return slog.String("idempotency_key", key)
}

// metricsAuth guards /metrics when [auth] metrics_token_role is set: the
// caller needs a token with that role or admin.
func (s *Server) metricsAuth(next http.Handler) http.Handler {
	role := s.cfg.Auth.MetricsTokenRole
	if role == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, aerr := s.identify(r.Header.Get("Authorization"))
		if aerr != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sepp"`)
			http.Error(w, "/metrics: "+aerr.msg, http.StatusUnauthorized)
			return
		}
		if !t.HasRole(role) && !t.HasRole(config.RoleAdmin) {
			http.Error(w, fmt.Sprintf("/metrics: token %q (roles %s) may not read the metrics: that needs a token with the role %s or admin (metrics_token_role)",
				t.Name, strings.Join(t.Roles, ", "), role), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkJobQueue refuses a call on job id with a *hiddenJob unless the
// caller of ctx may touch the job's queue, reading the job only for a token
// limited to some queues. A job that does not exist passes: the call itself
// then answers JOB_NOT_FOUND, as it does for a hidden job.
func (s *Server) checkJobQueue(ctx context.Context, id store.JobID) error {
	t := principal(ctx)
	if t == nil || len(t.Queues) == 0 {
		return nil
	}
	job, err := s.store.GetJob(ctx, &store.GetJobParams{ID: id})
	if errors.Is(err, store.ErrJobNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return hideJob(ctx, job.Queue)
}
