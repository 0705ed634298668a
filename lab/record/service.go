package record

import (
	"github.com/google/pprof/profile"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/carvelab/carve/lab/trace"
)

// ErrService is wrapped by FromService's errors for a service that cannot
// be recorded as asked: nothing listens at its address, it does not serve
// net/http/pprof there, or its trace has no heap events (it was not
// started with GODEBUG=traceallocfree=1). It wraps ErrUsage.
var ErrService = fmt.Errorf("%w: a service that cannot be traced as asked", ErrUsage)

// MaxServiceTrace is the longest trace FromService asks a service for.
const MaxServiceTrace = 24 * time.Hour

// DefaultMaxTraceBytes is the most bytes of an execution trace that
// FromService downloads unless Options.MaxTraceBytes says otherwise.
const DefaultMaxTraceBytes = 1 << 30

// serviceSlack is how much longer than the trace's duration FromService
// waits for the service's answer, whole: the time to connect, and to
// write the rest of the trace once it stops.
var serviceSlack = 10 * time.Second

// FromService records a running Go service: it reads the execution trace
// of d (at least a millisecond) from the service's /debug/pprof/trace
// (net/http/pprof) at base, and writes its heap's events to out in
// carve's native format of version 3, with the objects' types as labels
// and the runtime's heap metrics, as Record does for go test (see the
// package documentation, Go programs).
//
// base is the service's address, "http://127.0.0.1:6060" (or
// "127.0.0.1:6060"), or the URL of
// its trace handler (a path ending in /trace); FromService sets the
// query's seconds to d. The service must run with
// GODEBUG=traceallocfree=1, which it reads as each trace starts: without
// it the trace has no heap events, and the error wraps ErrService and
// trace.ErrNoGoHeap. So does the error of a refused connection and of a
// service without net/http/pprof at that address (HTTP 404); another
// answer than 200 OK is an error with the service's message.
//
// Starting the trace stops the world while the service writes a snapshot
// of its whole heap, and while the trace runs every allocation and sweep
// is an event: Result.StartPause is the pause the trace records. The
// download is bounded by Options.MaxTraceBytes and by a timeout 10
// seconds longer than d; it goes to a temporary file, removed at the end,
// and is converted once whole. When ctx is done first, the service stops
// its trace, nothing is written and the error wraps ctx.Err().
func FromService(ctx context.Context, base string, d time.Duration, out io.Writer, opt Options) (Result, error) {
	res := Result{Recorder: goRecorder.Name}
	u, err := traceURL(base, d)
	if err != nil {
		return res, err
	}
	shown := u.Redacted()
	res.Process.Program = shown
	limit := opt.MaxTraceBytes
	if limit <= 0 {
		limit = DefaultMaxTraceBytes
	}
	dir, err := os.MkdirTemp("", "carve-record-")
	if err != nil {
		return res, fmt.Errorf("record: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "service.trace")
	// The allocation sites: the service's allocs profile (sampled at its
	// own rate) before and after the trace, the allocations between
	// them; without it, no sites.
	before, berr := fetchProfile(ctx, u, "allocs")
	n, err := download(ctx, u, d, limit, path)
	if err != nil {
		return res, err
	}
	if berr != nil {
		res.SitesErr = berr
	} else if after, err := fetchProfile(ctx, u, "allocs"); err != nil {
		res.SitesErr = err
	} else if sites, err := sitesOf(after, before, stdPackages(ctx, os.Environ()), "the service's allocs profile"); err != nil {
		res.SitesErr = err
	} else if traced, err := tracedSizes(path, opt); err != nil {
		res.SitesErr = err
	} else {
		sites.Sampled = true
		sites.cover(traced)
		res.Sites, res.SitesSampled, opt.sites = sites, true, sites
	}
	comment := fmt.Sprintf("recorded by carve record --from %s --seconds %s\nfrom the execution trace of the service (net/http/pprof, GODEBUG=traceallocfree=1)",
		Redacted(base), seconds(d))
	err = convertGo(&res, path, shown, opt, clockedRSS{none: noRSSService}, out, comment)
	switch {
	case errors.Is(err, trace.ErrNoGoHeap):
		return res, &described{"record: the service's execution trace has no heap events: start the service with GODEBUG=traceallocfree=1",
			[]error{ErrService, err}}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return res, fmt.Errorf("record: GET %s: the trace ends in the middle of its data, after %d bytes: the service's answer was cut short: %w", shown, n, err)
	}
	return res, err
}

// maxProfileBytes bounds a profile fetchProfile reads.
const maxProfileBytes = 256 << 20

// fetchProfile gets the service's profile name (net/http/pprof's
// /debug/pprof/NAME) beside its trace at tu.
func fetchProfile(ctx context.Context, tu *url.URL, name string) (*profile.Profile, error) {
	pu := *tu
	pu.Path = strings.TrimSuffix(pu.Path, "/trace") + "/" + name
	pu.RawQuery = ""
	ctx, cancel := context.WithTimeout(ctx, serviceSlack)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pu.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("record: GET %s: cannot make the request", pu.Redacted())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, serviceError(ctx, pu.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("record: GET %s: %s", pu.Redacted(), resp.Status)
	}
	p, err := profile.Parse(io.LimitReader(resp.Body, maxProfileBytes))
	if err != nil {
		return nil, fmt.Errorf("record: GET %s: %w", pu.Redacted(), err)
	}
	return p, nil
}

// Redacted returns a service's address as given to FromService, with the
// password of its user information (http://user:password@host) replaced
// by "xxxxx", as url.URL's Redacted does: for messages and the trace's
// header.
func Redacted(base string) string {
	scheme, rest, ok := strings.Cut(base, "://")
	if !ok {
		scheme, rest = "", base
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		return base
	}
	user, _, hasPassword := strings.Cut(authority[:at], ":")
	if !hasPassword {
		return base
	}
	redacted := user + ":xxxxx" + rest[at:]
	if ok {
		redacted = scheme + "://" + redacted
	}
	return redacted
}

// traceURL returns the URL of the trace of d at base: base's own path if
// it ends in /trace, else base's path joined with /debug/pprof/trace.
func traceURL(base string, d time.Duration) (*url.URL, error) {
	if d < time.Millisecond || d > MaxServiceTrace {
		return nil, &described{fmt.Sprintf("record: a service's trace of %v: want at least a millisecond, at most %v", d, MaxServiceTrace), []error{ErrUsage}}
	}
	if !strings.Contains(base, "://") {
		base = "http://" + base // HOST:PORT
	}
	u, err := url.Parse(base)
	if err != nil {
		// url.Parse's error repeats the URL, password and all.
		return nil, &described{fmt.Sprintf("record: --from %s: not a URL", Redacted(base)), []error{ErrUsage}}
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, &described{fmt.Sprintf("record: --from %s: want the service's address as a URL, http://HOST:PORT", u.Redacted()), []error{ErrUsage}}
	}
	if !strings.HasSuffix(u.Path, "/trace") {
		u.Path = strings.TrimSuffix(u.Path, "/")
		if !strings.HasSuffix(u.Path, "/debug/pprof") {
			u.Path += "/debug/pprof"
		}
		u.Path += "/trace"
	}
	q := u.Query()
	q.Set("seconds", seconds(d))
	u.RawQuery = q.Encode()
	return u, nil
}

// seconds writes d in seconds, as net/http/pprof reads it.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// download reads the trace of d at u into the file at path, at most
// limit bytes of it, and returns how many it read.
func download(ctx context.Context, tu *url.URL, d time.Duration, limit int64, path string) (int64, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, d+serviceSlack,
		fmt.Errorf("the service had not sent its trace of %v after %v", d, d+serviceSlack))
	defer cancel()
	u := tu.Redacted() // in messages
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tu.String(), nil)
	if err != nil {
		return 0, fmt.Errorf("record: GET %s: cannot make the request", u) // its error repeats the URL, password and all
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, serviceError(ctx, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		err := fmt.Errorf("record: GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(msg)))
		if resp.StatusCode == http.StatusNotFound {
			err = &described{fmt.Sprintf("record: GET %s: %s: the service must import net/http/pprof, which serves /debug/pprof/trace on http.DefaultServeMux", u, resp.Status),
				[]error{ErrService}}
		}
		return 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("record: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) && ctx.Err() == nil:
		return n, fmt.Errorf("record: GET %s: the service's answer was cut short after %d bytes of its trace (the connection ended before the end its HTTP framing announced: %w)", u, n, err)
	case err != nil:
		return n, serviceError(ctx, u, err)
	case n > limit:
		return n, fmt.Errorf("record: GET %s: the trace passed %s before its end: record fewer seconds, or allow a larger trace", u, bytesText(limit))
	}
	return n, checkGoHeader(path, u)
}

// bytesText writes n in MiB when it is a whole number of them, else in
// bytes.
func bytesText(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// serviceError describes a failure to read the service's answer.
func serviceError(ctx context.Context, u string, err error) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		host := u
		if p, perr := url.Parse(u); perr == nil {
			host = p.Host
		}
		return &described{fmt.Sprintf("record: nothing listens at %s (connection refused): the service must import net/http/pprof and serve HTTP there, as go http.ListenAndServe(%q, nil) does",
			host, host), []error{ErrService, err}}
	case ctx.Err() != nil && context.Cause(ctx) != ctx.Err():
		return fmt.Errorf("record: GET %s: %w", u, context.Cause(ctx)) // the timeout
	case ctx.Err() != nil:
		return fmt.Errorf("record: stopped: %w", ctx.Err())
	}
	return fmt.Errorf("record: %w", err)
}

// checkGoHeader reports whether the file at path, downloaded from u,
// starts as a Go execution trace does.
func checkGoHeader(path, u string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := io.ReadFull(f, head)
	if strings.HasPrefix(string(head[:n]), "go 1.") {
		return nil
	}
	what := ""
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		what = " (gzip-compressed)"
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		what = " (zstd-compressed)"
	}
	return &described{fmt.Sprintf("record: GET %s: the answer%s, starting %q, is not a Go execution trace", u, what, head[:n]),
		[]error{ErrService}}
}

// described is an error with a message of its own that wraps others
// without repeating theirs.
type described struct {
	msg   string
	wraps []error
}

func (e *described) Error() string   { return e.msg }
func (e *described) Unwrap() []error { return e.wraps }
