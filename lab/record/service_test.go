package record_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carvelab/carve/lab/record"
	"github.com/carvelab/carve/lab/trace"
)

// goService builds testdata/service, a small service with net/http/pprof
// that allocates in a loop.
var goService = sync.OnceValues(func() (string, error) {
	return goBuild("service", "./testdata/service", []string{"CGO_ENABLED=0"})
})

// startService starts testdata/service with the environment entries env
// added, and returns its address, "http://127.0.0.1:PORT"; the test's
// cleanup kills it.
func startService(t *testing.T, env ...string) string {
	t.Helper()
	needGo(t)
	bin, err := goService()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(cmd.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("the service printed %q (%v), want its address; standard error:\n%s", line, err, stderr.Bytes())
	}
	return "http://" + addr
}

// TestFromService records testdata/service through its
// /debug/pprof/trace: the trace holds its requests' headers by type,
// replays, and tells the pause in which it started.
func TestFromService(t *testing.T) {
	base := startService(t, "GODEBUG=traceallocfree=1")
	var out bytes.Buffer
	start := time.Now()
	res, err := record.FromService(context.Background(), base, 300*time.Millisecond, &out, record.Options{})
	t.Logf("%d events from %s in %v; import %+v", res.Events, res.Process.Program, time.Since(start).Round(time.Millisecond), res.Import)
	if err != nil {
		t.Fatalf("FromService = %v", err)
	}
	t.Logf("the trace started in a stop-the-world pause of %v", res.StartPause)
	if res.Recorder != "go" || res.Events == 0 || len(res.GoHeap) == 0 || res.StartPause <= 0 {
		t.Errorf("Result = %+v, want the go recorder, events, samples of the Go heap and the pause", res)
	}
	if !strings.HasSuffix(res.Process.Program, "/debug/pprof/trace?seconds=0.3") {
		t.Errorf("Result.Process.Program = %q, want the trace's URL", res.Process.Program)
	}
	if !bytes.Contains(out.Bytes(), []byte("# recorded by carve record --from "+base+" --seconds 0.3")) {
		t.Errorf("the trace does not start with the recording's comment:\n%.300s", out.Bytes())
	}
	replays(t, out.Bytes(), "main.header")
}

// TestFromServiceErrors: what cannot be recorded is told, with the
// remedy; the errors of a service that must be started otherwise wrap
// ErrService (carve's command line exits with status 2 on them).
func TestFromServiceErrors(t *testing.T) {
	// A port nothing listens at.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/busy/trace", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Could not enable tracing: tracing is already enabled", http.StatusInternalServerError)
	})
	mux.HandleFunc("/html/debug/pprof/trace", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>not a trace</html>"))
	})
	mux.HandleFunc("/big/trace", func(w http.ResponseWriter, r *http.Request) {
		w.Write(append([]byte("go 1.26 trace\x00\x00\x00"), make([]byte, 4096)...))
	})
	mux.HandleFunc("/slow/trace", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer record.SetServiceSlack(200 * time.Millisecond)()

	for _, tt := range []struct {
		name    string
		base    string
		opt     record.Options
		service bool          // the error wraps ErrService
		is      error         // the error wraps it too, if not nil
		want    string        // in the error
		d       time.Duration // 0: 100 ms
		setup   func() string // the base, if not nil
	}{
		{name: "refused", base: refused, service: true, want: "connection refused): the service must import net/http/pprof"},
		{name: "no pprof", base: srv.URL, service: true, want: "404 Not Found: the service must import net/http/pprof"},
		{name: "busy", base: srv.URL + "/busy/trace", want: "500 Internal Server Error: Could not enable tracing: tracing is already enabled"},
		{name: "not a trace", base: srv.URL + "/html", service: true, want: "is not a Go execution trace"},
		{name: "too big", base: srv.URL + "/big/trace", opt: record.Options{MaxTraceBytes: 1000}, want: "passed 1000 bytes"},
		{name: "timeout", base: srv.URL + "/slow/trace", want: "had not sent its trace of 100ms after 300ms"},
		{name: "no URL", base: "ftp://127.0.0.1:6060", is: record.ErrUsage, want: "want the service's address as a URL"},
		{name: "no duration", base: srv.URL, d: time.Microsecond, is: record.ErrUsage, want: "at least a millisecond"},
		{name: "no heap events", setup: func() string { return startService(t) }, service: true, is: trace.ErrNoGoHeap,
			want: "start the service with GODEBUG=traceallocfree=1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base, d := tt.base, tt.d
			if tt.setup != nil {
				base = tt.setup()
			}
			if d == 0 {
				d = 100 * time.Millisecond
			}
			var out bytes.Buffer
			_, err := record.FromService(context.Background(), base, d, &out, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("FromService(%s) = %v, want an error saying %q", base, err, tt.want)
			}
			if got := errors.Is(err, record.ErrService); got != tt.service || tt.service && !errors.Is(err, record.ErrUsage) {
				t.Errorf("FromService(%s) = %v: ErrService %v, want %v (and ErrUsage with it)", base, err, got, tt.service)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("FromService(%s) = %v, want it to wrap %v", base, err, tt.is)
			}
			if out.Len() != 0 {
				t.Errorf("FromService(%s) wrote %d bytes, want nothing", base, out.Len())
			}
		})
	}
}

// TestFromServiceCancel: a recording whose context is done writes
// nothing, and its error wraps the context's.
func TestFromServiceCancel(t *testing.T) {
	base := startService(t, "GODEBUG=traceallocfree=1")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	_, err := record.FromService(ctx, base, time.Minute, &out, record.Options{})
	if !errors.Is(err, context.DeadlineExceeded) || out.Len() != 0 {
		t.Errorf("FromService = %v with %d bytes written, want context.DeadlineExceeded and nothing", err, out.Len())
	}
}
