package mcpfixture

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// NodeMajor is the Node.js major version the conformance suite needs (it
// imports fs.globSync).
const NodeMajor = 22

// Node finds a Node.js binary of at least major version min: the `node` on
// PATH if it is recent enough, else the one the optional dependency
// node-<os>-<arch> (interop/package.json) installed under interopDir. The
// error says what was looked for, to be a test's skip reason.
func Node(interopDir string, min int) (string, error) {
	var why []string
	if p, err := exec.LookPath("node"); err != nil {
		why = append(why, "no node on PATH")
	} else if v, err := nodeMajor(p); err != nil {
		why = append(why, err.Error())
	} else if v >= min {
		return p, nil
	} else {
		why = append(why, fmt.Sprintf("node on PATH is v%d", v))
	}
	osName, arch := runtime.GOOS, runtime.GOARCH
	if osName == "windows" {
		osName = "win"
	}
	if arch == "amd64" {
		arch = "x64"
	}
	exe := "node"
	if runtime.GOOS == "windows" {
		exe = "node.exe"
	}
	pkg := "node-" + osName + "-" + arch
	p := filepath.Join(interopDir, "node_modules", pkg, "bin", exe)
	if _, err := os.Stat(p); err != nil {
		why = append(why, fmt.Sprintf("no %s in %s (interop/package.json ships Node %d for linux-x64, linux-arm64, darwin-x64 and win-x64; run `npm ci --prefix interop`)", pkg, filepath.Join(interopDir, "node_modules"), min))
		return "", fmt.Errorf("no Node.js >= %d: %s", min, strings.Join(why, "; "))
	}
	if v, err := nodeMajor(p); err != nil || v < min {
		return "", fmt.Errorf("no Node.js >= %d: %s is v%d (%v)", min, p, v, err)
	}
	return p, nil
}

func nodeMajor(bin string) (int, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("%s --version: %w", bin, err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		return 0, fmt.Errorf("%s --version printed %q", bin, bytes.TrimSpace(out))
	}
	return n, nil
}

// TokenProxy serves, on a new loopback port, a reverse proxy to target's
// origin that adds the bearer token: the suite sends none, and the server's
// auth stays as it is. Host is kept (DNS-rebinding protection checks it),
// and an Origin naming the proxy becomes the server's own. It returns the
// proxy's origin ("http://127.0.0.1:PORT") and a function that stops it.
func TokenProxy(target, token string) (string, func(), error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return "", nil, errors.New("TokenProxy: target must be an absolute URL")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	front := "http://" + ln.Addr().String()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
			if r.In.Header.Get("Origin") == front {
				r.Out.Header.Set("Origin", u.Scheme+"://"+u.Host)
			}
		},
		FlushInterval: -1,
	}
	// The body is read before the request is forwarded: the transport
	// reads a streamed body once more for its end, and that read of the
	// client's body can fail while the server is already streaming its
	// answer, which closes the connection to the server and cuts the
	// answer short (seen as a tools/call stream with progress and no
	// result, about 1 call in 100).
	buffered := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "proxy: request body unreadable", http.StatusBadRequest)
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}
		proxy.ServeHTTP(w, r)
	})
	ps := &http.Server{Handler: buffered, ReadHeaderTimeout: 5 * time.Second}
	go ps.Serve(ln)
	return front, func() { ps.Close() }, nil
}
