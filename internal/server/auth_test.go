package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// The tokens of authConfig: each role's token, one limited to payments*,
// and their secrets.
const (
	producerSecret = "producer-secret-0123456789"
	workerSecret   = "worker-secret-0123456789"
	readerSecret   = "reader-secret-0123456789"
	adminSecret    = "admin-secret-0123456789"
	paymentsSecret = "payments-secret-0123456789"
	wrongSecret    = "no-such-token-0123456789"
)

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func authConfig(extra string) string {
	var b strings.Builder
	b.WriteString("[auth]\n" + extra + "\n")
	for _, t := range []struct{ name, secret, roles, queues string }{
		{"prod", producerSecret, `["producer"]`, ""},
		{"work", workerSecret, `["worker"]`, ""},
		{"read", readerSecret, `["reader"]`, ""},
		{"ops", adminSecret, `["admin"]`, ""},
		{"pay", paymentsSecret, `["producer", "worker", "reader", "admin"]`, `["payments*"]`},
	} {
		fmt.Fprintf(&b, "[[auth.tokens]]\nname = %q\nsecret_sha256 = %q\nroles = %s\n", t.name, sha256Hex(t.secret), t.roles)
		if t.queues != "" {
			fmt.Fprintf(&b, "queues = %s\n", t.queues)
		}
	}
	return b.String()
}

// rpcCase calls one RPC on either stack with a token (none when "").
type rpcCase struct {
	proc    string
	grpc    func(ctx context.Context, cc *grpc.ClientConn, token string) error
	connect func(ctx context.Context, base, token string, opts ...connect.ClientOption) error
}

func rpc[Req, Res any](proc string, req *Req) rpcCase {
	return rpcCase{
		proc: proc,
		grpc: func(ctx context.Context, cc *grpc.ClientConn, token string) error {
			if token != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
			}
			return cc.Invoke(ctx, proc, req, new(Res))
		},
		connect: func(ctx context.Context, base, token string, opts ...connect.ClientOption) error {
			c := connect.NewClient[Req, Res](http.DefaultClient, base+proc, opts...)
			r := connect.NewRequest(req)
			if token != "" {
				r.Header().Set("Authorization", "Bearer "+token)
			}
			_, err := c.CallUnary(ctx, r)
			return err
		},
	}
}

const fakeJobID = "0000000000000000000000000000000a"

// everyRPC calls each RPC of the four services once, with arguments that
// make it return at once.
var everyRPC = []rpcCase{
	rpc[seppv1.EnqueueRequest, seppv1.EnqueueResponse](seppv1connect.JobServiceEnqueueProcedure, &seppv1.EnqueueRequest{Queue: "t", JobType: "x"}),
	rpc[seppv1.EnqueueBatchRequest, seppv1.EnqueueBatchResponse](seppv1connect.JobServiceEnqueueBatchProcedure,
		&seppv1.EnqueueBatchRequest{Jobs: []*seppv1.EnqueueRequest{{Queue: "t", JobType: "x"}}}),
	rpc[seppv1.GetJobRequest, seppv1.GetJobResponse](seppv1connect.JobServiceGetJobProcedure, &seppv1.GetJobRequest{JobId: fakeJobID}),
	rpc[seppv1.CancelJobRequest, seppv1.CancelJobResponse](seppv1connect.JobServiceCancelJobProcedure, &seppv1.CancelJobRequest{JobId: fakeJobID}),
	rpc[seppv1.LookupIdempotencyKeyRequest, seppv1.LookupIdempotencyKeyResponse](seppv1connect.JobServiceLookupIdempotencyKeyProcedure,
		&seppv1.LookupIdempotencyKeyRequest{Queue: "t", IdempotencyKey: "k"}),
	rpc[seppv1.ReleaseIdempotencyKeyRequest, seppv1.ReleaseIdempotencyKeyResponse](seppv1connect.JobServiceReleaseIdempotencyKeyProcedure,
		&seppv1.ReleaseIdempotencyKeyRequest{Queue: "t", IdempotencyKey: "k"}),

	rpc[seppv1.ReserveRequest, seppv1.ReserveResponse](seppv1connect.WorkerServiceReserveProcedure, &seppv1.ReserveRequest{Queues: []string{"t"}, WorkerId: "w"}),
	rpc[seppv1.CompleteRequest, seppv1.CompleteResponse](seppv1connect.WorkerServiceCompleteProcedure, &seppv1.CompleteRequest{}),
	rpc[seppv1.CompleteBatchRequest, seppv1.CompleteBatchResponse](seppv1connect.WorkerServiceCompleteBatchProcedure, &seppv1.CompleteBatchRequest{}),
	rpc[seppv1.FailRequest, seppv1.FailResponse](seppv1connect.WorkerServiceFailProcedure, &seppv1.FailRequest{}),
	rpc[seppv1.ExtendLeaseRequest, seppv1.ExtendLeaseResponse](seppv1connect.WorkerServiceExtendLeaseProcedure, &seppv1.ExtendLeaseRequest{}),

	rpc[seppv1.ClaimEffectRequest, seppv1.ClaimEffectResponse](seppv1connect.EffectServiceClaimEffectProcedure, &seppv1.ClaimEffectRequest{}),
	rpc[seppv1.CompleteEffectRequest, seppv1.CompleteEffectResponse](seppv1connect.EffectServiceCompleteEffectProcedure, &seppv1.CompleteEffectRequest{}),
	rpc[seppv1.ReleaseEffectRequest, seppv1.ReleaseEffectResponse](seppv1connect.EffectServiceReleaseEffectProcedure, &seppv1.ReleaseEffectRequest{}),
	rpc[seppv1.ExtendEffectLeaseRequest, seppv1.ExtendEffectLeaseResponse](seppv1connect.EffectServiceExtendEffectLeaseProcedure, &seppv1.ExtendEffectLeaseRequest{}),
	rpc[seppv1.GetEffectRequest, seppv1.GetEffectResponse](seppv1connect.EffectServiceGetEffectProcedure, &seppv1.GetEffectRequest{}),

	rpc[seppv1.ListQueuesRequest, seppv1.ListQueuesResponse](seppv1connect.AdminServiceListQueuesProcedure, &seppv1.ListQueuesRequest{}),
	rpc[seppv1.ListJobsRequest, seppv1.ListJobsResponse](seppv1connect.AdminServiceListJobsProcedure, &seppv1.ListJobsRequest{Queue: "t"}),
	rpc[seppv1.RequeueDeadJobsRequest, seppv1.RequeueDeadJobsResponse](seppv1connect.AdminServiceRequeueDeadJobsProcedure, &seppv1.RequeueDeadJobsRequest{Queue: "t"}),
	rpc[seppv1.PurgeDeadJobsRequest, seppv1.PurgeDeadJobsResponse](seppv1connect.AdminServicePurgeDeadJobsProcedure, &seppv1.PurgeDeadJobsRequest{Queue: "t"}),
	rpc[seppv1.PauseQueueRequest, seppv1.PauseQueueResponse](seppv1connect.AdminServicePauseQueueProcedure, &seppv1.PauseQueueRequest{Queue: "t"}),
	rpc[seppv1.ResumeQueueRequest, seppv1.ResumeQueueResponse](seppv1connect.AdminServiceResumeQueueProcedure, &seppv1.ResumeQueueRequest{Queue: "t"}),
	rpc[seppv1.CreateBackupRequest, seppv1.CreateBackupResponse](seppv1connect.AdminServiceCreateBackupProcedure, &seppv1.CreateBackupRequest{}),
	rpc[seppv1.ReadBackupFileRequest, seppv1.ReadBackupFileResponse](seppv1connect.AdminServiceReadBackupFileProcedure, &seppv1.ReadBackupFileRequest{BackupId: "b", Path: "p"}),
	rpc[seppv1.DeleteBackupRequest, seppv1.DeleteBackupResponse](seppv1connect.AdminServiceDeleteBackupProcedure, &seppv1.DeleteBackupRequest{BackupId: "b"}),
}

// allowedRoles is the role table of docs/security.md, written out here
// independently of the server's: admin may call everything.
var allowedRoles = map[string][]string{
	seppv1connect.JobServiceEnqueueProcedure:              {"producer"},
	seppv1connect.JobServiceEnqueueBatchProcedure:         {"producer"},
	seppv1connect.JobServiceGetJobProcedure:               {"producer", "reader"},
	seppv1connect.JobServiceLookupIdempotencyKeyProcedure: {"producer", "reader"},
	seppv1connect.WorkerServiceReserveProcedure:           {"worker"},
	seppv1connect.WorkerServiceCompleteProcedure:          {"worker"},
	seppv1connect.WorkerServiceCompleteBatchProcedure:     {"worker"},
	seppv1connect.WorkerServiceFailProcedure:              {"worker"},
	seppv1connect.WorkerServiceExtendLeaseProcedure:       {"worker"},
	seppv1connect.EffectServiceClaimEffectProcedure:       {"worker"},
	seppv1connect.EffectServiceCompleteEffectProcedure:    {"worker"},
	seppv1connect.EffectServiceReleaseEffectProcedure:     {"worker"},
	seppv1connect.EffectServiceExtendEffectLeaseProcedure: {"worker"},
	seppv1connect.EffectServiceGetEffectProcedure:         {"worker"},
	seppv1connect.AdminServiceListQueuesProcedure:         {"reader"},
	seppv1connect.AdminServiceListJobsProcedure:           {"reader"},
}

// TestAuthEveryRPCEveryRole calls every RPC with every role's token, no
// token and an unknown token, on gRPC, Connect and gRPC-Web: an allowed call is
// not refused for auth reasons, a refused one gets exactly UNAUTHENTICATED
// or PERMISSION_DENIED.
func TestAuthEveryRPCEveryRole(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: authConfig("")})
	cc, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	callers := []struct {
		role, secret string
	}{
		{"producer", producerSecret}, {"worker", workerSecret}, {"reader", readerSecret}, {"admin", adminSecret},
		{"no token", ""}, {"wrong token", wrongSecret},
	}
	for _, c := range everyRPC {
		if _, ok := allowedRoles[c.proc]; !ok && !strings.Contains(c.proc, "Admin") && !strings.Contains(c.proc, "Cancel") && !strings.Contains(c.proc, "Release") {
			t.Fatalf("%s has no entry in allowedRoles", c.proc)
		}
		for _, who := range callers {
			var want codes.Code // OK: allowed, whatever else the call answers
			switch {
			case who.secret == "" || who.secret == wrongSecret:
				want = codes.Unauthenticated
			case who.role != "admin" && !slices.Contains(allowedRoles[c.proc], who.role):
				want = codes.PermissionDenied
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			gerr := c.grpc(ctx, cc, who.secret)
			cerr := c.connect(ctx, srv.URL, who.secret)
			werr := c.connect(ctx, srv.URL, who.secret, connect.WithGRPCWeb())
			cancel()
			gotG := status.Code(gerr)
			connectCode := func(err error) codes.Code {
				if err == nil {
					return codes.OK
				}
				return codes.Code(connect.CodeOf(err))
			}
			for _, got := range []struct {
				stack string
				code  codes.Code
				err   error
			}{{"gRPC", gotG, gerr}, {"Connect", connectCode(cerr), cerr}, {"gRPC-Web", connectCode(werr), werr}} {
				authCode := got.code == codes.Unauthenticated || got.code == codes.PermissionDenied
				switch {
				case want == codes.OK && authCode:
					t.Errorf("%s %s as %s: refused (%v); the role allows it", got.stack, c.proc, who.role, got.err)
				case want != codes.OK && got.code != want:
					t.Errorf("%s %s as %s: got %v (%v), want %v", got.stack, c.proc, who.role, got.code, got.err, want)
				}
			}
			if want == codes.Unauthenticated && !strings.Contains(status.Convert(gerr).Message(), "Authorization: Bearer") {
				t.Errorf("%s as %s: the message does not say how to send a token: %v", c.proc, who.role, gerr)
			}
			if want == codes.PermissionDenied {
				msg := status.Convert(gerr).Message()
				if !strings.Contains(msg, strings.TrimPrefix(c.proc, "/")) || !strings.Contains(msg, "admin") {
					t.Errorf("%s as %s: the message does not name the call and the roles: %q", c.proc, who.role, msg)
				}
			}
		}
	}

	// Health stays open without a token.
	if _, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("gRPC health without a token: %v", err)
	}
	resp, err := http.Post(srv.URL+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader("{}"))
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("Connect health without a token: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
}

func connectJobs(base, secret string) (seppv1connect.JobServiceClient, []connect.ClientOption) {
	opts := []connect.ClientOption{connect.WithInterceptors(bearerInterceptor(secret))}
	return seppv1connect.NewJobServiceClient(http.DefaultClient, base, opts...), opts
}

// bearerInterceptor sends secret as the Authorization header (none when "").
func bearerInterceptor(secret string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if secret != "" {
				req.Header().Set("Authorization", "Bearer "+secret)
			}
			return next(ctx, req)
		}
	}
}

func wantCode(t *testing.T, what string, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code || err == nil {
		t.Errorf("%s: got %v, want %v", what, err, code)
	}
}

// TestAuthQueueScope: a token limited to payments* works there and is
// refused on emails: enqueue, reserve, lookup; a get or cancel of a job
// there is answered as for a job that does not exist, with nothing of it.
func TestAuthQueueScope(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: authConfig("")})
	ctx := context.Background()
	admin, _ := connectJobs(srv.URL, adminSecret)
	pay, opts := connectJobs(srv.URL, paymentsSecret)
	payWorker := seppv1connect.NewWorkerServiceClient(http.DefaultClient, srv.URL, opts...)
	payAdmin := seppv1connect.NewAdminServiceClient(http.DefaultClient, srv.URL, opts...)

	emailJob, err := admin.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "emails", JobType: "receipt",
		IdempotencyKey: strPtr("mail-1"), Payload: []byte("secret payload")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pay.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "payments-eu", JobType: "charge"}); err != nil {
		t.Fatalf("enqueue on payments-eu with the payments* token: %v", err)
	}

	_, err = pay.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "emails", JobType: "receipt"})
	wantCode(t, "enqueue on emails", err, connect.CodePermissionDenied)
	if err != nil && !strings.Contains(err.Error(), `"emails"`) {
		t.Errorf("the refusal does not name the queue: %v", err)
	}
	if info := errorInfo(err); info.GetReason() != "PERMISSION_DENIED" || info.GetMetadata()["queue"] != "emails" || info.GetMetadata()["token"] != "pay" {
		t.Errorf("ErrorInfo of the refusal: %v", info)
	}
	_, err = pay.EnqueueBatch(ctx, &seppv1.EnqueueBatchRequest{Jobs: []*seppv1.EnqueueRequest{
		{Queue: "payments", JobType: "charge"}, {Queue: "emails", JobType: "receipt"}}})
	wantCode(t, "batch with a job on emails", err, connect.CodePermissionDenied)
	_, err = payWorker.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"payments", "emails"}, WorkerId: "w"})
	wantCode(t, "reserve on payments and emails", err, connect.CodePermissionDenied)
	_, err = pay.LookupIdempotencyKey(ctx, &seppv1.LookupIdempotencyKeyRequest{Queue: "emails", IdempotencyKey: "mail-1"})
	wantCode(t, "lookup on emails", err, connect.CodePermissionDenied)
	got, err := pay.GetJob(ctx, &seppv1.GetJobRequest{JobId: emailJob.GetJobId()})
	wantCode(t, "get of a job on emails", err, connect.CodeNotFound)
	if got != nil || (err != nil && strings.Contains(err.Error(), "secret payload")) {
		t.Errorf("get of a job on emails returned something of it: %v %v", got, err)
	}
	_, err = pay.CancelJob(ctx, &seppv1.CancelJobRequest{JobId: emailJob.GetJobId()})
	wantCode(t, "cancel of a job on emails", err, connect.CodeNotFound)
	_, err = payAdmin.ListJobs(ctx, &seppv1.ListJobsRequest{Queue: "emails"})
	wantCode(t, "list jobs of emails", err, connect.CodePermissionDenied)
	_, err = payAdmin.PurgeDeadJobs(ctx, &seppv1.PurgeDeadJobsRequest{All: true})
	wantCode(t, "purge of every queue", err, connect.CodePermissionDenied)
	_, err = payAdmin.PauseQueue(ctx, &seppv1.PauseQueueRequest{Queue: "emails"})
	wantCode(t, "pause emails", err, connect.CodePermissionDenied)

	qs, err := payAdmin.ListQueues(ctx, &seppv1.ListQueuesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs.GetQueues() {
		if !strings.HasPrefix(q.GetName(), "payments") {
			t.Errorf("ListQueues with the payments* token shows %q", q.GetName())
		}
	}
	if len(qs.GetQueues()) != 1 {
		t.Errorf("ListQueues with the payments* token: %v, want payments-eu only", qs.GetQueues())
	}

	// The job on emails is untouched, and the allowed calls work.
	j, err := admin.GetJob(ctx, &seppv1.GetJobRequest{JobId: emailJob.GetJobId()})
	if err != nil || j.GetJob().GetState() != seppv1.JobState_JOB_STATE_AVAILABLE {
		t.Fatalf("the emails job after the refused calls: %v %v", j, err)
	}
	if _, err := payWorker.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"payments-eu"}, WorkerId: "w"}); err != nil {
		t.Errorf("reserve on payments-eu: %v", err)
	}
}

func strPtr(s string) *string { return &s }

// errorInfo returns the ErrorInfo detail of a Connect error, or nil.
func errorInfo(err error) *errdetails.ErrorInfo {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok {
				return info
			}
		}
	}
	return nil
}

// TestAuthNothingWrittenWithoutToken: an enqueue without a token, or with an
// unknown one, writes nothing, and a read returns no payload.
func TestAuthNothingWrittenWithoutToken(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: authConfig("")})
	ctx := context.Background()
	admin, _ := connectJobs(srv.URL, adminSecret)
	for _, secret := range []string{"", wrongSecret} {
		anon, _ := connectJobs(srv.URL, secret)
		_, err := anon.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "emails", JobType: "receipt", IdempotencyKey: strPtr("anon-1"), Payload: []byte("p")})
		wantCode(t, "enqueue without a valid token", err, connect.CodeUnauthenticated)
		_, err = anon.EnqueueBatch(ctx, &seppv1.EnqueueBatchRequest{Jobs: []*seppv1.EnqueueRequest{{Queue: "emails", JobType: "receipt", IdempotencyKey: strPtr("anon-2")}}})
		wantCode(t, "batch without a valid token", err, connect.CodeUnauthenticated)
	}
	for _, key := range []string{"anon-1", "anon-2"} {
		l, err := admin.LookupIdempotencyKey(ctx, &seppv1.LookupIdempotencyKeyRequest{Queue: "emails", IdempotencyKey: key})
		if err != nil || l.GetFound() {
			t.Errorf("lookup of %s after the refused enqueues: %v %v", key, l, err)
		}
	}
	adminSvc := seppv1connect.NewAdminServiceClient(http.DefaultClient, srv.URL, connect.WithInterceptors(bearerInterceptor(adminSecret)))
	jobs, err := adminSvc.ListJobs(ctx, &seppv1.ListJobsRequest{})
	if err != nil || len(jobs.GetJobs()) != 0 {
		t.Fatalf("jobs after the refused enqueues: %v %v", jobs, err)
	}

	// A job that exists: without a token its payload is not returned.
	ack, err := admin.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "emails", JobType: "receipt", Payload: []byte("secret payload")})
	if err != nil {
		t.Fatal(err)
	}
	anon, _ := connectJobs(srv.URL, "")
	got, err := anon.GetJob(ctx, &seppv1.GetJobRequest{JobId: ack.GetJobId()})
	wantCode(t, "get without a token", err, connect.CodeUnauthenticated)
	if got != nil {
		t.Errorf("get without a token returned %v", got)
	}
}

// TestAuthAuditLine: a PurgeDeadJobs is logged with msg=audit, the token's
// name, the call and its queue; a key release with the key as log_keys
// says.
func TestAuthAuditLine(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: "[server]\nlog_keys = \"hash\"\n" + authConfig("")})
	ctx := context.Background()
	admin := seppv1connect.NewAdminServiceClient(http.DefaultClient, srv.URL, connect.WithInterceptors(bearerInterceptor(adminSecret)))
	if _, err := admin.PurgeDeadJobs(ctx, &seppv1.PurgeDeadJobsRequest{Queue: "emails"}); err != nil {
		t.Fatal(err)
	}
	jobs, _ := connectJobs(srv.URL, adminSecret)
	key := "order-8a3f"
	if _, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "emails", JobType: "receipt", IdempotencyKey: &key}); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "emails", JobType: "receipt", IdempotencyKey: &key}); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.ReleaseIdempotencyKey(ctx, &seppv1.ReleaseIdempotencyKeyRequest{Queue: "emails", IdempotencyKey: key}); err != nil {
		t.Fatal(err)
	}
	// A refused admin call is audited too.
	prodAdmin := seppv1connect.NewAdminServiceClient(http.DefaultClient, srv.URL, connect.WithInterceptors(bearerInterceptor(producerSecret)))
	_, err := prodAdmin.PauseQueue(ctx, &seppv1.PauseQueueRequest{Queue: "emails"})
	wantCode(t, "pause with a producer token", err, connect.CodePermissionDenied)

	logs := srv.Logs.String()
	hashed := "sha256:" + sha256Hex(key)[:16]
	for _, want := range []string{
		`msg=audit token=ops call=sepp.v1.AdminService/PurgeDeadJobs queue=emails outcome=ok`,
		`msg=audit token=ops call=sepp.v1.JobService/ReleaseIdempotencyKey queue=emails idempotency_key=` + hashed + ` outcome=ok`,
		`msg="dedup hit" queue=emails idempotency_key=` + hashed,
		`msg=audit token=prod call=sepp.v1.AdminService/PauseQueue queue=emails outcome=PERMISSION_DENIED`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, key) {
		t.Errorf("log_keys = \"hash\", yet the logs hold the key:\n%s", logs)
	}
}

// TestAuthLogKeysNone leaves keys out of the log lines; without [auth] the
// audit line names the token "-".
func TestAuthLogKeysNone(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: "[server]\nlog_keys = \"none\"\n"})
	ctx := context.Background()
	jobs := seppv1connect.NewJobServiceClient(http.DefaultClient, srv.URL)
	key := "order-8a3f"
	for range 2 {
		if _, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "emails", JobType: "receipt", IdempotencyKey: &key}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := jobs.ReleaseIdempotencyKey(ctx, &seppv1.ReleaseIdempotencyKeyRequest{Queue: "emails", IdempotencyKey: key}); err != nil {
		t.Fatal(err)
	}
	logs := srv.Logs.String()
	if strings.Contains(logs, key) || !strings.Contains(logs, `msg="dedup hit"`) {
		t.Errorf("log_keys = \"none\": %s", logs)
	}
	if !strings.Contains(logs, `msg=audit token=- call=sepp.v1.JobService/ReleaseIdempotencyKey queue=emails outcome=ok`) {
		t.Errorf("no audit line for the release:\n%s", logs)
	}
}

// TestAuthMetrics: with metrics_token_role = "reader", /metrics needs a
// reader or admin token; without the key it is open.
func TestAuthMetrics(t *testing.T) {
	get := func(url, secret string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", url+"/metrics", nil)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	srv := testserver.Start(t, testserver.Options{Config: authConfig(`metrics_token_role = "reader"`)})
	for _, tc := range []struct {
		secret string
		want   int
	}{{"", 401}, {wrongSecret, 401}, {producerSecret, 403}, {workerSecret, 403}, {readerSecret, 200}, {adminSecret, 200}} {
		if got := get(srv.URL, tc.secret); got != tc.want {
			t.Errorf("/metrics with %q: %d, want %d", tc.secret, got, tc.want)
		}
	}
	open := testserver.Start(t, testserver.Options{Config: authConfig("")})
	if got := get(open.URL, ""); got != 200 {
		t.Errorf("/metrics without metrics_token_role and without a token: %d, want 200", got)
	}
}

// TestAuthTokenFromEnvAndFile reads secrets from secret_env and secret_file.
func TestAuthTokenFromEnvAndFile(t *testing.T) {
	t.Setenv("SEPP_TEST_TOKEN_ENV", "env-secret")
	file := t.TempDir() + "/token"
	if err := os.WriteFile(file, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, testserver.Options{Config: fmt.Sprintf(`[[auth.tokens]]
name = "from-env"
secret_env = "SEPP_TEST_TOKEN_ENV"
roles = ["reader"]

[[auth.tokens]]
name = "from-file"
secret_file = %q
roles = ["reader"]
`, file)})
	ctx := context.Background()
	for _, secret := range []string{"env-secret", "file-secret"} {
		jobs, _ := connectJobs(srv.URL, secret)
		if _, err := jobs.LookupIdempotencyKey(ctx, &seppv1.LookupIdempotencyKeyRequest{Queue: "q", IdempotencyKey: "k"}); err != nil {
			t.Errorf("lookup with %q: %v", secret, err)
		}
	}
}

// TestAuthDeadJobsByID: a token limited to payments* may not requeue or
// purge a dead job of emails by its id: the id is listed as missing, as an
// unknown id is, and the job stays dead. Naming emails is refused.
func TestAuthDeadJobsByID(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: authConfig("")})
	ctx := context.Background()
	jobs, opts := connectJobs(srv.URL, adminSecret)
	worker := seppv1connect.NewWorkerServiceClient(http.DefaultClient, srv.URL, opts...)
	ack, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "emails", JobType: "receipt"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := worker.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"emails"}, WorkerId: "w"})
	if err != nil || len(res.GetJobs()) != 1 {
		t.Fatalf("reserve: %v %v", res, err)
	}
	if _, err := worker.Fail(ctx, &seppv1.FailRequest{JobId: ack.GetJobId(), LeaseToken: res.GetJobs()[0].GetLeaseToken(), Error: "x", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	pay := seppv1connect.NewAdminServiceClient(http.DefaultClient, srv.URL, connect.WithInterceptors(bearerInterceptor(paymentsSecret)))
	purged, err := pay.PurgeDeadJobs(ctx, &seppv1.PurgeDeadJobsRequest{JobIds: []string{ack.GetJobId()}})
	if err != nil || purged.GetPurged() != 0 || !slices.Equal(purged.GetMissingJobIds(), []string{ack.GetJobId()}) {
		t.Errorf("purge of an emails job by id: %v %v; want 0 purged, the id missing", purged, err)
	}
	requeued, err := pay.RequeueDeadJobs(ctx, &seppv1.RequeueDeadJobsRequest{Queue: "payments", JobIds: []string{ack.GetJobId()}})
	if err != nil || requeued.GetRequeued() != 0 || !slices.Equal(requeued.GetMissingJobIds(), []string{ack.GetJobId()}) {
		t.Errorf("requeue of an emails job by id, naming payments: %v %v; want 0 requeued, the id missing", requeued, err)
	}
	_, err = pay.RequeueDeadJobs(ctx, &seppv1.RequeueDeadJobsRequest{Queue: "emails", JobIds: []string{ack.GetJobId()}})
	wantCode(t, "requeue of an emails job by id, naming emails", err, connect.CodePermissionDenied)
	j, err := jobs.GetJob(ctx, &seppv1.GetJobRequest{JobId: ack.GetJobId()})
	if err != nil || j.GetJob().GetState() != seppv1.JobState_JOB_STATE_DEAD {
		t.Fatalf("the dead job after the refused calls: %v %v", j, err)
	}
}

// postJSONAs is postJSON with a token, returning the raw answer.
func postJSONAs(t *testing.T, url, secret, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// TestAuthNoExistenceOracle: a token limited to payments* gets, for a job
// on emails, exactly the answer it gets for an id no job has, on every call
// that takes job ids: GetJob and CancelJob (JOB_NOT_FOUND), RequeueDeadJobs
// and PurgeDeadJobs (the id among missing_job_ids, in its place), over
// Connect JSON and gRPC; it got PERMISSION_DENIED, which told it the job
// existed. The audit line tells the operator the truth.
func TestAuthNoExistenceOracle(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: authConfig("")})
	ctx := context.Background()
	// A dead job on emails and one on payments.
	dead := func(secret, queue string) string {
		jobs, opts := connectJobs(srv.URL, secret)
		worker := seppv1connect.NewWorkerServiceClient(http.DefaultClient, srv.URL, opts...)
		ack, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: queue, JobType: "t", Payload: []byte("secret payload")})
		if err != nil {
			t.Fatal(err)
		}
		res, err := worker.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{queue}, WorkerId: "w"})
		if err != nil || len(res.GetJobs()) != 1 {
			t.Fatalf("reserve on %s: %v %v", queue, res, err)
		}
		if _, err := worker.Fail(ctx, &seppv1.FailRequest{JobId: ack.GetJobId(), LeaseToken: res.GetJobs()[0].GetLeaseToken(), Error: "x", Permanent: true}); err != nil {
			t.Fatal(err)
		}
		return ack.GetJobId()
	}
	emails, payments := dead(adminSecret, "emails"), dead(paymentsSecret, "payments")
	const unknown = "0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d"

	for _, call := range []struct{ proc, body string }{
		{"JobService/GetJob", `{"jobId":"ID"}`},
		{"JobService/CancelJob", `{"jobId":"ID"}`},
		{"AdminService/RequeueDeadJobs", `{"jobIds":["ID"]}`},
		{"AdminService/PurgeDeadJobs", `{"jobIds":["ID"]}`},
	} {
		answer := func(id string) string {
			status, raw := postJSONAs(t, srv.URL+"/sepp.v1."+call.proc, paymentsSecret, strings.ReplaceAll(call.body, "ID", id))
			return fmt.Sprintf("%d %s", status, strings.ReplaceAll(raw, id, "ID"))
		}
		hidden, none := answer(emails), answer(unknown)
		if hidden != none {
			t.Errorf("%s: a job on emails gets\n%s\nbut an id no job has gets\n%s", call.proc, hidden, none)
		}
		if strings.Contains(hidden, "secret payload") || strings.Contains(hidden, "emails") {
			t.Errorf("%s: the answer tells of the job: %s", call.proc, hidden)
		}
	}
	// gRPC: the same status, message and details.
	conn := dialGRPC(t, srv)
	getJob := func(id string) string {
		md := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+paymentsSecret)
		_, err := seppv1.NewJobServiceClient(conn).GetJob(md, &seppv1.GetJobRequest{JobId: id})
		st := status.Convert(err)
		return fmt.Sprintf("%v %q %v", st.Code(), st.Message(), st.Details())
	}
	if hidden, none := getJob(emails), getJob(unknown); hidden != none || !strings.HasPrefix(hidden, "NotFound") {
		t.Errorf("gRPC GetJob: a job on emails gets %s, an id no job has %s", hidden, none)
	}

	// Ids of three kinds in one call: the emails job is missing in its
	// place, the payments job is requeued.
	pay := seppv1connect.NewAdminServiceClient(http.DefaultClient, srv.URL, connect.WithInterceptors(bearerInterceptor(paymentsSecret)))
	res, err := pay.RequeueDeadJobs(ctx, &seppv1.RequeueDeadJobsRequest{JobIds: []string{emails, payments, unknown, emails}})
	if err != nil || res.GetRequeued() != 1 || !slices.Equal(res.GetMissingJobIds(), []string{emails, unknown}) {
		t.Fatalf("requeue of [emails, payments, unknown, emails]: %v %v; want 1 requeued, missing [emails unknown]", res, err)
	}
	jobs, _ := connectJobs(srv.URL, adminSecret)
	for id, want := range map[string]seppv1.JobState{emails: seppv1.JobState_JOB_STATE_DEAD, payments: seppv1.JobState_JOB_STATE_AVAILABLE} {
		if j, err := jobs.GetJob(ctx, &seppv1.GetJobRequest{JobId: id}); err != nil || j.GetJob().GetState() != want {
			t.Errorf("job %s after the calls: %v %v, want %v", id, j, err, want)
		}
	}

	logs := srv.Logs.String()
	for _, want := range []string{
		`msg=audit token=pay call=sepp.v1.JobService/CancelJob job_id=` + emails + ` outcome=PERMISSION_DENIED job_queue=emails answered=JOB_NOT_FOUND`,
		`msg=audit token=pay call=sepp.v1.JobService/CancelJob job_id=` + unknown + ` outcome=JOB_NOT_FOUND`,
		`msg=audit token=pay call=sepp.v1.AdminService/PurgeDeadJobs queue="" job_ids=` + emails + ` outcome=ok hidden_job_ids=` + emails,
		`msg=audit token=pay call=sepp.v1.AdminService/RequeueDeadJobs queue="" job_ids=` + strings.Join([]string{emails, payments, unknown, emails}, ",") + ` outcome=ok hidden_job_ids=` + emails + "," + emails,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}
