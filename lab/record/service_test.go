package record_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carvelab/carve/lab/record"
	"github.com/carvelab/carve/lab/trace"
	"github.com/klauspost/compress/zstd"
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
	// The sites: the service's allocs profile before and after the
	// trace, sampled at its own rate: shares.
	if res.SitesErr != nil || res.Sites == nil || !res.SitesSampled || !res.Sites.Sampled {
		t.Errorf("sites %+v, sampled %v, error %v: want the allocs profile's, sampled", res.Sites, res.SitesSampled, res.SitesErr)
	}
	t.Logf("sites: %d of %d bytes, all by share: %d", res.Import.GoSiteBytes, res.Import.GoBytes, res.Import.GoShareBytes)
	if res.Import.GoSiteBytes != res.Import.GoShareBytes {
		t.Errorf("a service's sites: %d bytes with a site, %d by share: want every one by share", res.Import.GoSiteBytes, res.Import.GoShareBytes)
	}
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

// TestFromServiceSecret records a service through a URL with a user and
// password: the password is in neither the trace nor the Result, nor in
// the errors of a service that cannot be recorded.
func TestFromServiceSecret(t *testing.T) {
	const secret = "s3cr3t-pass"
	base := startService(t, "GODEBUG=traceallocfree=1")
	withSecret := strings.Replace(base, "http://", "http://user:"+secret+"@", 1)
	var out bytes.Buffer
	res, err := record.FromService(context.Background(), withSecret, 200*time.Millisecond, &out, record.Options{})
	if err != nil {
		t.Fatalf("FromService = %v", err)
	}
	if bytes.Contains(out.Bytes(), []byte(secret)) || strings.Contains(res.Process.Program, secret) {
		t.Errorf("the password is in the trace (%v) or the Result's program %q", bytes.Contains(out.Bytes(), []byte(secret)), res.Process.Program)
	}
	if !strings.Contains(res.Process.Program, "user:xxxxx@") {
		t.Errorf("Process.Program = %q, want the URL with its password redacted", res.Process.Program)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	for _, b := range []string{
		strings.Replace(srv.URL, "http://", "http://user:"+secret+"@", 1), // 404
		"user:" + secret + "@127.0.0.1:1",                                 // refused
		"http://user:" + secret + "@127.0.0.1:bad port/",                  // not a URL
	} {
		_, err := record.FromService(context.Background(), b, 100*time.Millisecond, io.Discard, record.Options{})
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("FromService(%s) = %v, want an error without the password", b, err)
		}
	}
	if got := record.Redacted("http://user:" + secret + "@host:1/x?y=z"); got != "http://user:xxxxx@host:1/x?y=z" {
		t.Errorf("Redacted = %q", got)
	}
}

// TestFromServiceBody: a body that is not a whole trace is told by the
// URL it came from (never carve's temporary file), a body cut short by
// how many bytes came, and a compressed body is bounded by the bytes it
// decompresses to, as a plain one is.
func TestFromServiceBody(t *testing.T) {
	head := []byte("go 1.26 trace\x00\x00\x00")
	mux := http.NewServeMux()
	mux.HandleFunc("/garbage/trace", func(w http.ResponseWriter, r *http.Request) {
		w.Write(append(head, bytes.Repeat([]byte{0xff}, 100)...))
	})
	mux.HandleFunc("/cut/trace", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10000")
		w.Write(append(head, make([]byte, 5000-len(head))...))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	big := append(head, make([]byte, 1<<20)...)
	mux.HandleFunc("/gzip/trace", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		z := gzip.NewWriter(w)
		z.Write(big)
		z.Close()
	})
	mux.HandleFunc("/zstd/trace", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "zstd")
		z, _ := zstd.NewWriter(w)
		z.Write(big)
		z.Close()
	})
	mux.HandleFunc("/gzfile/trace", func(w http.ResponseWriter, r *http.Request) {
		z := gzip.NewWriter(w) // a compressed file, served as it is
		z.Write(big)
		z.Close()
	})
	golden, err := os.ReadFile("../trace/testdata/labelled/go.trace")
	if err != nil {
		t.Fatal(err)
	}
	mux.HandleFunc("/golden/trace", func(w http.ResponseWriter, r *http.Request) { w.Write(golden) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	limit := record.Options{MaxTraceBytes: 64 << 10}
	for _, tt := range []struct {
		path string
		opt  record.Options
		want string
	}{
		{"/garbage/trace", record.Options{}, srv.URL + "/garbage/trace"},
		{"/cut/trace", record.Options{}, "cut short after 5000 bytes"},
		{"/gzip/trace", limit, "passed 65536 bytes"},
		{"/zstd/trace", limit, "(zstd-compressed), starting"},
		{"/gzfile/trace", limit, "(gzip-compressed), starting"},
		{"/golden/trace", record.Options{MaxGoGeneration: 100 << 10}, "--" + trace.MaxGoGenerationFlag + " raises the bound"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			var out bytes.Buffer
			_, err := record.FromService(context.Background(), srv.URL+tt.path, 100*time.Millisecond, &out, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), os.TempDir()) {
				t.Errorf("FromService = %v, want an error saying %q, naming no temporary file", err, tt.want)
			}
			t.Log(err)
			if out.Len() != 0 {
				t.Errorf("FromService wrote %d bytes, want nothing", out.Len())
			}
		})
	}
}
