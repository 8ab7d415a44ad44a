// Command csi-proxy-go-check proves that a real grpc-go client, dialing the
// way kubernetes-csi/csi-proxy's Go client library does, works against a
// csi-proxy endpoint.
//
// Like upstream's client (client/groups/<group>/<version>/client_generated.go)
// it passes the endpoint path as the grpc.Dial target with a context dialer
// and insecure credentials, so grpc-go sends that string as the HTTP/2
// :authority. Before dialing it opens one raw connection to the endpoint that
// sends nothing (upstream probes that the pipe exists that way) and keeps it
// open during the calls.
//
// On ONE gRPC connection it then makes many calls of the Filesystem API
// (v1, v1beta2 or v2alpha1: their PathExists, Mkdir, Rmdir and IsSymlink
// messages are wire-identical to the well-known wrapper types), checks
// every answer, checks from the bytes it wrote that exactly one connection
// was dialed and that every HEADERS frame carried the expected :authority,
// prints one line per check and exits 1 on any mismatch (2 on bad usage).
//
// Build (GOPATH mode, Debian's packaged grpc-go):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o csi-proxy-go-check ./compat/go/csi-proxy-go-check
//
// or compat/go/build.sh [linux|windows]; see compat/go/README.md.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/golang/protobuf/ptypes/wrappers"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	endpoint = flag.String("endpoint", "", "what the dialer really connects to: a Unix socket path, or a named pipe such as \\\\.\\pipe\\csi-proxy-filesystem-v1 (Windows)")
	target   = flag.String("target", "", "the grpc.Dial target string, sent as :authority (default: -endpoint)")
	wantAuth = flag.String("expect-authority", "", "the :authority every request must carry (default: -target)")
	version  = flag.String("version", "v1", "Filesystem API version: v1, v1beta2 or v2alpha1")
	existing = flag.String("exists", "", "a path under the kubelet dir that exists")
	missing  = flag.String("missing", "", "a path under the kubelet dir that does not exist")
	mkdir    = flag.String("mkdir", "", "a new directory under the kubelet dir to create (with a subdirectory \"sub\" that is removed again)")
	outside  = flag.String("outside", "", "a path outside the kubelet dir (must be refused)")
	calls    = flag.Int("calls", 50, "sequential PathExists calls per path")
	parallel = flag.Int("parallel", 8, "goroutines making concurrent calls on the same connection")
	timeout  = flag.Duration("timeout", 60*time.Second, "overall deadline")
	pause    = flag.Duration("pause", 0, "after the checks, leave the connection idle this long, then check that a call still works")
	dials    = flag.Int("dials", 1, "gRPC connections the client must have dialed: exactly 1, or at least this many (when the server closes idle connections during -pause, grpc-go redials)")
	bench    = flag.Int("bench", 0, "instead of the checks: time this many sequential calls of each kind (PathExists of -exists, PathExists of -outside, Mkdir+Rmdir of -mkdir) and print their p50/p99 in microseconds")
	kinds    = flag.String("kinds", "pathexists-existing,pathexists-refused,mkdir-rmdir", "with -bench: the kinds of call to time, comma-separated (empty: none)")
	refusedT = flag.Bool("throughput-refused", false, "with -clients: the calls are PathExists of -outside, each answered with an error status (the transport's ceiling: no file-system work on the server)")
	clients  = flag.String("clients", "", "with -bench: then, for each count in this comma-separated list (e.g. 1,4,16), that many clients, each on its own gRPC connection, make -bench PathExists calls of -exists in total, all at once; prints the calls per second")
)

var failures int

// quote shows s in single quotes when it is plain printable ASCII (Windows
// paths stay readable), else Go-quoted.
func quote(s string) string {
	for _, r := range s {
		if r < 0x20 || r > 0x7e || r == '\'' {
			return fmt.Sprintf("%q", s)
		}
	}
	return "'" + s + "'"
}

func check(ok bool, format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	if ok {
		fmt.Printf("ok    %s\n", msg)
	} else {
		failures++
		fmt.Printf("FAIL  %s\n", msg)
	}
}

// recordingConn keeps a copy of every byte written, to decode the HTTP/2
// frames afterwards.
type recordingConn struct {
	net.Conn
	mu      sync.Mutex
	written bytes.Buffer
}

func (c *recordingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.written.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

func (c *recordingConn) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.written.Bytes()...)
}

// authorities decodes the client side of an HTTP/2 connection and returns
// the number of request HEADERS frames and the :authority values seen.
func authorities(wire []byte) (int, map[string]int, error) {
	if !bytes.HasPrefix(wire, []byte(http2.ClientPreface)) {
		return 0, nil, fmt.Errorf("no HTTP/2 client preface")
	}
	fr := http2.NewFramer(io.Discard, bytes.NewReader(wire[len(http2.ClientPreface):]))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 1 << 20
	n, seen := 0, map[string]int{}
	for {
		f, err := fr.ReadFrame()
		if err == io.EOF {
			return n, seen, nil
		}
		if err != nil {
			return n, seen, err
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok {
			n++
			seen[h.PseudoValue("authority")]++
		}
	}
}

// str is a PathExistsRequest, MkdirRequest, RmdirRequest (force = false) or
// IsSymlinkRequest: all are {string path = 1; ...}.
func str(s string) *wrappers.StringValue { return &wrappers.StringValue{Value: s} }

func pathExists(ctx context.Context, cc *grpc.ClientConn, path string) (bool, error) {
	resp := &wrappers.BoolValue{}
	err := cc.Invoke(ctx, "/"+*version+".Filesystem/PathExists", str(path), resp)
	return resp.GetValue(), err
}

func expectExists(ctx context.Context, cc *grpc.ClientConn, path string, want bool) {
	got, err := pathExists(ctx, cc, path)
	check(err == nil && got == want, "PathExists(%s) = %v, %v (want %v)", path, got, err, want)
}

func expectRefused(err error, what string) {
	c := status.Code(err)
	check(c == codes.PermissionDenied || c == codes.InvalidArgument,
		"%s refused: %v (want PermissionDenied or InvalidArgument)", what, err)
}

func main() {
	flag.Parse()
	if *awsEbs {
		if *target == "" {
			*target = *endpoint
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		runAwsEbs(ctx)
		cancel()
		if failures > 0 {
			fmt.Printf("FAILED: %d check(s)\n", failures)
			os.Exit(1)
		}
		fmt.Println("PASS")
		return
	}
	if *endpoint == "" || *existing == "" || *missing == "" || *mkdir == "" || *outside == "" {
		fmt.Fprintln(os.Stderr, "usage: csi-proxy-go-check -endpoint E -exists P -missing P -mkdir P -outside P [-target T] [-expect-authority A] [-version V]")
		os.Exit(2)
	}
	switch *version {
	case "v1", "v1beta2", "v2alpha1":
	default:
		fmt.Fprintf(os.Stderr, "unsupported -version %q (v1, v1beta2, v2alpha1)\n", *version)
		os.Exit(2)
	}
	if *target == "" {
		*target = *endpoint
	}
	if *wantAuth == "" {
		*wantAuth = *target
	}
	fmt.Printf("grpc-go %s, %s %s/%s; endpoint %s, target %s, service %s.Filesystem\n",
		grpc.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, quote(*endpoint), quote(*target), *version)

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	// The probe: a raw connection that sends nothing, open during the calls.
	probe, err := dialEndpoint(ctx, *endpoint)
	check(err == nil, "raw probe connection to %s: %v", *endpoint, err)
	if err != nil {
		os.Exit(1)
	}

	// Every connection grpc-go dials, recorded (the address it passes, the
	// target, is ignored: the dialer connects to the real endpoint).
	var mu sync.Mutex
	var dialed []*recordingConn
	cc, err := grpc.Dial(*target,
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			c, err := dialEndpoint(ctx, *endpoint)
			if err != nil {
				return nil, err
			}
			if *bench > 0 {
				return c, nil
			}
			rec := &recordingConn{Conn: c}
			mu.Lock()
			dialed = append(dialed, rec)
			mu.Unlock()
			return rec, nil
		}),
		grpc.WithInsecure())
	check(err == nil, "grpc.Dial(%s): %v", quote(*target), err)
	if err != nil {
		os.Exit(1)
	}

	if *bench > 0 {
		runBench(ctx, cc)
		runThroughput(ctx)
		return
	}

	start := time.Now()
	n := 0
	for i := 0; i < *calls; i++ {
		got, err := pathExists(ctx, cc, *existing)
		if err != nil || !got {
			check(false, "PathExists(%s) call %d = %v, %v (want true)", *existing, i, got, err)
			break
		}
		got, err = pathExists(ctx, cc, *missing)
		if err != nil || got {
			check(false, "PathExists(%s) call %d = %v, %v (want false)", *missing, i, got, err)
			break
		}
		n += 2
	}
	check(n == 2**calls, "%d sequential PathExists calls (existing: true, missing: false) in %v", n, time.Since(start).Round(time.Millisecond))

	// Concurrent calls: many streams in flight on the one connection.
	var wg sync.WaitGroup
	var bad int32
	for g := 0; g < *parallel; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < *calls; i++ {
				p, want := *existing, true
				if (g+i)%2 == 1 {
					p, want = *missing, false
				}
				if got, err := pathExists(ctx, cc, p); err != nil || got != want {
					atomic.AddInt32(&bad, 1)
					fmt.Printf("      goroutine %d call %d: PathExists(%s) = %v, %v\n", g, i, p, got, err)
				}
			}
		}(g)
	}
	wg.Wait()
	check(bad == 0, "%d concurrent PathExists calls from %d goroutines, %d wrong", *parallel**calls, *parallel, bad)

	isLink := &wrappers.BoolValue{}
	err = cc.Invoke(ctx, "/"+*version+".Filesystem/IsSymlink", str(*existing), isLink)
	check(err == nil && !isLink.GetValue(), "IsSymlink(%s) = %v, %v (want false)", *existing, isLink.GetValue(), err)

	expectExists(ctx, cc, *mkdir, false)
	err = cc.Invoke(ctx, "/"+*version+".Filesystem/Mkdir", str(*mkdir), &empty.Empty{})
	check(err == nil, "Mkdir(%s): %v", *mkdir, err)
	expectExists(ctx, cc, *mkdir, true)
	sub := *mkdir + string(os.PathSeparator) + "sub"
	err = cc.Invoke(ctx, "/"+*version+".Filesystem/Mkdir", str(sub), &empty.Empty{})
	check(err == nil, "Mkdir(%s): %v", sub, err)
	expectExists(ctx, cc, sub, true)
	// RmdirRequest{path = 1, force = 2}: force stays false.
	err = cc.Invoke(ctx, "/"+*version+".Filesystem/Rmdir", str(sub), &empty.Empty{})
	check(err == nil, "Rmdir(%s): %v", sub, err)
	expectExists(ctx, cc, sub, false)

	_, err = pathExists(ctx, cc, *outside)
	expectRefused(err, "PathExists("+*outside+")")
	outsideDir := *outside + string(os.PathSeparator) + "go-check-made-this"
	err = cc.Invoke(ctx, "/"+*version+".Filesystem/Mkdir", str(outsideDir), &empty.Empty{})
	expectRefused(err, "Mkdir("+outsideDir+")")

	// A request larger than the default 16 KiB frame size (several DATA
	// frames): a path too long to be valid.
	long := *mkdir + string(os.PathSeparator) + strings.Repeat("x", 40000)
	_, err = pathExists(ctx, cc, long)
	check(status.Code(err) == codes.InvalidArgument, "PathExists(<%d-byte path>) refused: %v (want InvalidArgument)", len(long), status.Code(err))

	// Another version's method is not served on this endpoint.
	other := "v1beta1"
	if *version == "v1beta1" {
		other = "v1"
	}
	_, err = func() (bool, error) {
		resp := &wrappers.BoolValue{}
		err := cc.Invoke(ctx, "/"+other+".Filesystem/PathExists", str(*existing), resp)
		return resp.GetValue(), err
	}()
	check(status.Code(err) == codes.Unimplemented, "/%s.Filesystem/PathExists on this endpoint: %v (want Unimplemented)", other, status.Code(err))

	// The connection still works after all the errors.
	expectExists(ctx, cc, *existing, true)

	// Idle, as drivers are between calls: the server may ping the
	// connection, or send GOAWAY and close it; the next call must work
	// regardless (grpc-go redials transparently).
	if *pause > 0 {
		time.Sleep(*pause)
		expectExists(ctx, cc, *existing, true)
	}

	mu.Lock()
	conns := dialed
	mu.Unlock()
	if *dials == 1 {
		check(len(conns) == 1, "gRPC connections dialed: %d (want 1)", len(conns))
	} else {
		check(len(conns) >= *dials, "gRPC connections dialed: %d (want at least %d)", len(conns), *dials)
	}
	if len(conns) > 0 {
		frames, seen, err := authorities(conns[0].bytes())
		var vals []string
		for a, k := range seen {
			vals = append(vals, fmt.Sprintf("%s x%d", quote(a), k))
		}
		sort.Strings(vals)
		check(err == nil && len(seen) == 1 && seen[*wantAuth] == frames && frames > 0,
			"%d request HEADERS frames sent, :authority %s (want all %s), decode error %v", frames, strings.Join(vals, ", "), quote(*wantAuth), err)
	}

	err = cc.Close()
	check(err == nil, "close gRPC connection: %v", err)
	err = probe.Close()
	check(err == nil, "close raw probe connection: %v", err)

	if failures > 0 {
		fmt.Printf("FAILED: %d check(s)\n", failures)
		os.Exit(1)
	}
	fmt.Println("PASS")
}

// timeCalls makes n+n/10 calls of f (the first tenth unmeasured) and
// returns the p50 and p99 latencies in microseconds.
func timeCalls(n int, f func() error) (float64, float64, error) {
	var lat []time.Duration
	for i := 0; i < n+n/10; i++ {
		t := time.Now()
		if err := f(); err != nil {
			return 0, 0, err
		}
		if i >= n/10 {
			lat = append(lat, time.Since(t))
		}
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	at := func(q float64) float64 {
		i := int(float64(len(lat)) * q)
		if i >= len(lat) {
			i = len(lat) - 1
		}
		return float64(lat[i].Nanoseconds()) / 1000
	}
	return at(0.50), at(0.99), nil
}

// runBench prints one "bench <name> p50 <us> p99 <us>" line per kind of call.
func runBench(ctx context.Context, cc *grpc.ClientConn) {
	all := []struct {
		name string
		f    func() error
	}{
		{"pathexists-existing", func() error {
			ok, err := pathExists(ctx, cc, *existing)
			if err == nil && !ok {
				err = fmt.Errorf("PathExists(%s) = false", *existing)
			}
			return err
		}},
		{"pathexists-refused", func() error {
			_, err := pathExists(ctx, cc, *outside)
			// Upstream refuses with a plain Go error: code Unknown.
			if c := status.Code(err); c != codes.PermissionDenied && c != codes.InvalidArgument && c != codes.Unknown {
				return fmt.Errorf("PathExists(%s) was not refused: %v", *outside, err)
			}
			return nil
		}},
		{"mkdir-rmdir", func() error {
			if err := cc.Invoke(ctx, "/"+*version+".Filesystem/Mkdir", str(*mkdir), &empty.Empty{}); err != nil {
				return err
			}
			return cc.Invoke(ctx, "/"+*version+".Filesystem/Rmdir", str(*mkdir), &empty.Empty{})
		}},
	}
	wanted := map[string]bool{}
	for _, name := range strings.Split(*kinds, ",") {
		if name = strings.TrimSpace(name); name != "" {
			wanted[name] = true
		}
	}
	for _, k := range all {
		if !wanted[k.name] {
			continue
		}
		delete(wanted, k.name)
		p50, p99, err := timeCalls(*bench, k.f)
		if err != nil {
			fmt.Printf("bench %s failed: %v\n", k.name, err)
			os.Exit(1)
		}
		fmt.Printf("bench %s p50 %.1f p99 %.1f\n", k.name, p50, p99)
	}
	for name := range wanted {
		fmt.Printf("bench: unknown kind %q\n", name)
		os.Exit(2)
	}
}

// throughputCall makes one call of the throughput run: PathExists of
// -exists answered true, or with -throughput-refused PathExists of -outside
// answered with an error status from the server (not a transport failure).
func throughputCall(ctx context.Context, cc *grpc.ClientConn) bool {
	if *refusedT {
		_, err := pathExists(ctx, cc, *outside)
		switch status.Code(err) {
		case codes.OK, codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
			return false
		}
		return true
	}
	ok, err := pathExists(ctx, cc, *existing)
	return err == nil && ok
}

// runThroughput prints one "throughput clients <n> calls <c> seconds <s>
// per-second <r>" line per count of -clients: n clients, each on its own
// gRPC connection (dialed and used once before the clock starts), make
// -bench PathExists calls of -exists in total, all at once.
func runThroughput(ctx context.Context) {
	for _, field := range strings.Split(*clients, ",") {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		var n int
		if _, err := fmt.Sscan(field, &n); err != nil || n < 1 {
			fmt.Printf("throughput: bad client count %q\n", field)
			os.Exit(2)
		}
		conns := make([]*grpc.ClientConn, n)
		for i := range conns {
			cc, err := grpc.Dial(*target,
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
					return dialEndpoint(ctx, *endpoint)
				}),
				grpc.WithInsecure())
			if err == nil && !throughputCall(ctx, cc) {
				err = fmt.Errorf("the first call failed")
			}
			if err != nil {
				fmt.Printf("throughput: client %d: %v\n", i, err)
				os.Exit(1)
			}
			conns[i] = cc
		}
		per := (*bench + n - 1) / n
		var wg sync.WaitGroup
		var failed int32
		start := time.Now()
		for _, cc := range conns {
			wg.Add(1)
			go func(cc *grpc.ClientConn) {
				defer wg.Done()
				for i := 0; i < per; i++ {
					if !throughputCall(ctx, cc) {
						atomic.AddInt32(&failed, 1)
						return
					}
				}
			}(cc)
		}
		wg.Wait()
		took := time.Since(start).Seconds()
		for _, cc := range conns {
			cc.Close()
		}
		if failed > 0 {
			fmt.Printf("throughput: %d of %d clients failed\n", failed, n)
			os.Exit(1)
		}
		fmt.Printf("throughput clients %d calls %d seconds %.3f per-second %.1f\n", n, per*n, took, float64(per*n)/took)
	}
}
