package leasequeue

// A handler reads its job's dependencies' outcomes (Job.Dependencies,
// Dependency.Decode), on each path a lease arrives by; Submit sends
// DependsOn and OnDependencyFailure.

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

const (
	renderedID = "0190b3c4-0000-7000-8000-000000000001"
	brokenID   = "0190b3c4-0000-7000-8000-000000000002"
)

// withDependencies is l carrying deps as its dependencies.
func withDependencies(l *lqv1.Lease, truncated bool, deps ...*lqv1.DependencyResult) *lqv1.Lease {
	for _, d := range deps {
		l.Job.DependsOn = append(l.Job.DependsOn, d.GetJobId())
	}
	l.Dependencies, l.DependenciesTruncated = deps, truncated
	return l
}

func TestAHandlerReadsItsDependencies(t *testing.T) {
	t.Run("Work", func(t *testing.T) { testDependencies(t, func(f *fakeServer) {}) })
	t.Run("StreamClaims", func(t *testing.T) { testDependencies(t, func(f *fakeServer) { f.work = false }) })
	t.Run("Claim", func(t *testing.T) { testDependencies(t, func(f *fakeServer) { f.noStreams = true }) })
}

// page is what a dependency's result decodes into.
type page struct {
	URL   string `json:"url"`
	Pages int    `json:"pages"`
}

// seenDeps is what a handler saw of its job's dependencies.
type seenDeps struct {
	deps      []Dependency
	truncated bool
	decoded   []page
	errs      []error
}

func testDependencies(t *testing.T, path func(*fakeServer)) {
	result, _ := structpb.NewValue(map[string]any{"url": "s3://pages/1.pdf", "pages": 12})
	merge := withDependencies(lease("merge", nil), false,
		&lqv1.DependencyResult{JobId: renderedID, State: lqv1.JobState_JOB_STATE_COMPLETED, Result: result},
		&lqv1.DependencyResult{JobId: brokenID, State: lqv1.JobState_JOB_STATE_DEAD, LastError: "page 2 is missing"})
	many := withDependencies(lease("merge", nil), true, &lqv1.DependencyResult{JobId: renderedID, State: lqv1.JobState_JOB_STATE_COMPLETED})
	alone := lease("merge", nil)
	f := newFake(t, true, merge, many, alone)
	path(f)
	var mu sync.Mutex
	seen := map[string]seenDeps{}
	w := NewWorker(dial(t, f), WorkerOptions{Queue: "q", Concurrency: 2})
	w.Handle("merge", func(ctx context.Context, job *Job) (any, error) {
		if mine := job.Dependencies(); len(mine) > 0 {
			mine[0].JobID = "changed" // a caller's slice is its own
		}
		s := seenDeps{deps: job.Dependencies(), truncated: job.DependenciesTruncated()}
		for _, d := range s.deps {
			var p page
			s.errs = append(s.errs, d.Decode(&p))
			s.decoded = append(s.decoded, p)
		}
		mu.Lock()
		seen[job.ID] = s
		mu.Unlock()
		return len(s.deps), nil
	})
	stop := runWorker(t, w)
	f.outcomes(t, 3)
	stop()

	mu.Lock()
	defer mu.Unlock()
	got := seen[merge.Job.Id]
	if len(got.deps) != 2 {
		t.Fatalf("dependencies = %+v", got.deps)
	}
	want := []Dependency{
		{JobID: renderedID, State: lqv1.JobState_JOB_STATE_COMPLETED, Result: map[string]any{"url": "s3://pages/1.pdf", "pages": 12.0}},
		{JobID: brokenID, State: lqv1.JobState_JOB_STATE_DEAD, LastError: "page 2 is missing"},
	}
	for i, d := range got.deps {
		if d.JobID != want[i].JobID || d.State != want[i].State || d.LastError != want[i].LastError || !reflect.DeepEqual(d.Result, want[i].Result) {
			t.Errorf("dependency %d = %+v, want %+v", i, d, want[i])
		}
	}
	if !reflect.DeepEqual(got.decoded, []page{{URL: "s3://pages/1.pdf", Pages: 12}, {}}) || got.errs[0] != nil || got.errs[1] != nil {
		t.Errorf("decoded %+v, errors %v", got.decoded, got.errs)
	}
	if got.truncated {
		t.Error("truncated without more dependencies")
	}
	if s := seen[many.Job.Id]; !s.truncated || len(s.deps) != 1 || s.deps[0].Result != nil {
		t.Errorf("a truncated lease: %+v", s)
	}
	if s := seen[alone.Job.Id]; s.truncated || len(s.deps) != 0 {
		t.Errorf("a job without dependencies: %+v", s)
	}
}

func TestDecodeOfADependencyReportsAMismatch(t *testing.T) {
	v, _ := structpb.NewValue("not an object")
	job := &Job{dependencies: dependenciesOf(&lqv1.Lease{Dependencies: []*lqv1.DependencyResult{{JobId: renderedID, Result: v}}})}
	var p page
	if err := job.Dependencies()[0].Decode(&p); err == nil || !strings.Contains(err.Error(), "cannot unmarshal string") {
		t.Errorf("Decode = %v", err)
	}
}

func TestSubmitSendsDependsOnAndThePolicy(t *testing.T) {
	f := newFake(t, true)
	client := NewClient(dial(t, f))
	ctx := context.Background()
	opts := &SubmitOptions{DependsOn: []string{renderedID, brokenID}, OnDependencyFailure: lqv1.DependencyFailurePolicy_DEPENDENCY_FAILURE_POLICY_IGNORE}
	if _, err := client.Submit(ctx, "q", "merge", nil, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Submit(ctx, "q", "merge", nil, &SubmitOptions{DependsOn: []string{renderedID}, OnDependencyFailure: 7}); err == nil ||
		!strings.HasPrefix(err.Error(), "OnDependencyFailure: unknown policy 7") {
		t.Errorf("an unknown policy: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.submits) != 1 {
		t.Fatalf("%d submits", len(f.submits))
	}
	req := f.submits[0]
	if !reflect.DeepEqual(req.GetDependsOn(), []string{renderedID, brokenID}) ||
		req.GetOnDependencyFailure() != lqv1.DependencyFailurePolicy_DEPENDENCY_FAILURE_POLICY_IGNORE {
		t.Errorf("depends_on %v, on_dependency_failure %v", req.GetDependsOn(), req.GetOnDependencyFailure())
	}
}
