// pulumi-language-python: a compact Python language host for the Pulumi CLI.
//
// Written for netpeer because the upstream language host module
// (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) is not
// served by the Go module proxy reachable from our machines. It is built by
// scripts/install-pulumi.sh inside a throwaway wrapper module against the
// pinned github.com/pulumi/pulumi/sdk/v3 release, and relies on that module's
// own Python toolchain package (sdk/v3/python/toolchain) for everything that
// touches interpreters and virtual environments, so it honours Pulumi.yaml's
// `runtime.options` (toolchain: pip|poetry|uv, virtualenv, typechecker) the
// same way the upstream host does. With no virtualenv option it uses whatever
// python is first on PATH (or PULUMI_PYTHON_CMD), like upstream.
//
// It runs programs through `pulumi-language-python-exec` (copied next to this
// binary from the sdk module) and implements the RPCs needed by
// `pulumi preview/up/refresh/destroy/import/install/about` and the Automation
// API, and GenerateProgram (Pulumi's Python program generator: the code
// `pulumi import` prints). The other code generation RPCs (GenerateProject,
// GeneratePackage, Pack, Link) are left unimplemented: the engine reports them
// as such.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	hclsyntax "github.com/pulumi/pulumi/pkg/v3/codegen/hcl2/syntax"
	"github.com/pulumi/pulumi/pkg/v3/codegen/pcl"
	pygen "github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/cmdutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/logging"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

const (
	execScriptName = "pulumi-language-python-exec"
	// Exit code pulumi-language-python-exec uses after it already showed the user an actionable message.
	bailExitCode = 32
)

func main() {
	var tracing string
	flag.StringVar(&tracing, "tracing", "", "Emit tracing to a Zipkin-compatible tracing endpoint")
	// Logging flags the engine forwards with --logflow (read by logging.InitLogging). Some of them are
	// already registered by imported packages (glog), so only add the missing ones.
	if flag.Lookup("logtostderr") == nil {
		flag.Bool("logtostderr", false, "Log to stderr instead of to files")
	}
	if flag.Lookup("v") == nil {
		flag.Int("v", 0, "Enable verbose logging at the given level")
	}
	if flag.Lookup("logflow") == nil {
		flag.Bool("logflow", false, "Flow log settings to child processes")
	}
	// Accepted for compatibility with older engines; Pulumi.yaml options arrive in ProgramInfo nowadays.
	root := flag.String("root", "", "Project root path (legacy)")
	virtualenv := flag.String("virtualenv", "", "Virtual environment path (legacy)")
	useExecutor := flag.String("use-executor", "", "Use the given executor instead of "+execScriptName)
	flag.Parse()

	logging.InitLogging(false, 0, false)
	cmdutil.InitTracing("pulumi-language-python", "pulumi-language-python", tracing)

	execPath := *useExecutor
	if execPath == "" {
		self, err := os.Executable()
		if err != nil {
			cmdutil.Exit(fmt.Errorf("could not determine current executable: %w", err))
		}
		execPath = filepath.Join(filepath.Dir(self), execScriptName)
	}
	if _, err := os.Stat(execPath); err != nil {
		cmdutil.Exit(fmt.Errorf("missing executor %s: %w", execPath, err))
	}

	var engineAddress string
	if args := flag.Args(); len(args) > 0 {
		engineAddress = args[0]
	}

	h := &host{
		execPath:      execPath,
		engineAddress: engineAddress,
		tracing:       tracing,
		legacyRoot:    *root,
		legacyVenv:    *virtualenv,
	}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, h)
			return nil
		},
		Options: rpcutil.TracingServerInterceptorOptions(nil),
	})
	if err != nil {
		cmdutil.Exit(fmt.Errorf("could not start language host RPC server: %w", err))
	}
	// The engine reads the port from our first line of stdout.
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		cmdutil.Exit(fmt.Errorf("language host RPC stopped serving: %w", err))
	}
}

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	execPath string
	tracing  string

	mu            sync.Mutex
	engineAddress string

	legacyRoot string
	legacyVenv string
}

func (h *host) engine() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.engineAddress
}

// pythonOptions turns the program info sent by the engine (Pulumi.yaml runtime options) into toolchain options.
func (h *host) pythonOptions(info *pulumirpc.ProgramInfo) (toolchain.PythonOptions, error) {
	cwd, _ := os.Getwd()
	opts := toolchain.PythonOptions{Root: cwd, ProgramDir: cwd, Virtualenv: h.legacyVenv}
	if h.legacyRoot != "" {
		opts.Root = h.legacyRoot
	}
	if info == nil {
		return opts, nil
	}
	if d := info.GetRootDirectory(); d != "" {
		opts.Root = d
	}
	if d := info.GetProgramDirectory(); d != "" {
		opts.ProgramDir = d
	}
	fields := info.GetOptions().GetFields()
	str := func(key string) (string, error) {
		v, ok := fields[key]
		if !ok || v == nil || v.AsInterface() == nil {
			return "", nil
		}
		s, ok := v.AsInterface().(string)
		if !ok {
			return "", fmt.Errorf("runtime option %q must be a string, got %v", key, v.AsInterface())
		}
		return s, nil
	}
	venv, err := str("virtualenv")
	if err != nil {
		return opts, err
	}
	if venv != "" {
		opts.Virtualenv = venv
	}
	tc, err := str("toolchain")
	if err != nil {
		return opts, err
	}
	switch strings.ToLower(tc) {
	case "":
		// Auto-detect (uv.lock / poetry.lock), falling back to pip; like upstream. A virtualenv option
		// alone means pip.
		if opts.Virtualenv != "" {
			opts.Toolchain = toolchain.Pip
		} else {
			opts.Toolchain = toolchain.Auto
		}
	case "pip":
		opts.Toolchain = toolchain.Pip
	case "poetry":
		opts.Toolchain = toolchain.Poetry
	case "uv":
		opts.Toolchain = toolchain.Uv
	default:
		return opts, fmt.Errorf("unsupported toolchain option %q (want pip, poetry or uv)", tc)
	}
	checker, err := str("typechecker")
	if err != nil {
		return opts, err
	}
	switch strings.ToLower(checker) {
	case "":
		opts.Typechecker = toolchain.TypeCheckerNone
	case "mypy":
		opts.Typechecker = toolchain.TypeCheckerMypy
	case "pyright":
		opts.Typechecker = toolchain.TypeCheckerPyright
	default:
		return opts, fmt.Errorf("unsupported typechecker option %q (want mypy or pyright)", checker)
	}
	return opts, nil
}

func (h *host) resolve(ctx context.Context, info *pulumirpc.ProgramInfo) (toolchain.Toolchain, toolchain.PythonOptions, error) {
	opts, err := h.pythonOptions(info)
	if err != nil {
		return nil, opts, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, opts, err
	}
	return tc, opts, nil
}

func (h *host) Handshake(ctx context.Context,
	req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	h.mu.Lock()
	if a := req.GetEngineAddress(); a != "" {
		h.engineAddress = a
	}
	h.mu.Unlock()
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(ctx context.Context, _ *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

// pluginScan lists pulumi-plugin.json files shipped by the installed distributions.
const pluginScan = `
import json, sys
try:
    import importlib.metadata as md
except ImportError:
    print("[]"); sys.exit(0)
out = []
for dist in md.distributions():
    for f in (dist.files or []):
        if f.name in ("pulumi-plugin.json", "pulumiplugin.json"):
            try:
                data = json.loads(f.read_text())
            except Exception:
                continue
            out.append({"package": dist.metadata["Name"], "version": dist.version, "plugin": data})
print(json.dumps(out))
`

func (h *host) GetRequiredPackages(ctx context.Context,
	req *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	tc, _, err := h.resolve(ctx, req.GetInfo())
	if err != nil {
		return nil, err
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return nil, err
	}
	cmd, err := tc.Command(ctx, "-c", pluginScan)
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing installed Pulumi packages: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var found []struct {
		Package string                  `json:"package"`
		Version string                  `json:"version"`
		Plugin  plugin.PulumiPluginJSON `json:"plugin"`
	}
	if err := json.Unmarshal(out, &found); err != nil {
		return nil, fmt.Errorf("parsing installed Pulumi packages: %w", err)
	}
	param := func(p *plugin.PulumiParameterizationJSON) *pulumirpc.PackageParameterization {
		if p == nil {
			return nil
		}
		return &pulumirpc.PackageParameterization{Name: p.Name, Version: p.Version, Value: p.Value}
	}
	var pkgs []*pulumirpc.PackageDependency
	for _, f := range found {
		if !f.Plugin.Resource {
			continue
		}
		name := f.Plugin.Name
		if name == "" {
			name = strings.TrimPrefix(strings.ReplaceAll(strings.ToLower(f.Package), "_", "-"), "pulumi-")
		}
		v := f.Plugin.Version
		if v == "" {
			// Without an explicit plugin version the package version is the best guess (upstream does the same
			// for plain x.y.z versions).
			v = f.Version
		}
		if v != "" && !strings.HasPrefix(v, "v") {
			v = "v" + v
		}
		pkgs = append(pkgs, &pulumirpc.PackageDependency{
			Name:             name,
			Kind:             "resource",
			Version:          v,
			Server:           f.Plugin.Server,
			Parameterization: param(f.Plugin.Parameterization),
			Extension:        param(f.Plugin.ExtensionParameterization),
		})
	}
	return &pulumirpc.GetRequiredPackagesResponse{Packages: pkgs}, nil
}

func (h *host) GetRequiredPlugins(ctx context.Context,
	req *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	resp, err := h.GetRequiredPackages(ctx, &pulumirpc.GetRequiredPackagesRequest{Info: req.GetInfo()})
	if err != nil {
		return nil, err
	}
	var plugins []*pulumirpc.PluginDependency
	for _, p := range resp.GetPackages() {
		if p.GetParameterization() != nil || p.GetExtension() != nil {
			continue
		}
		plugins = append(plugins, &pulumirpc.PluginDependency{
			Name: p.GetName(), Kind: p.GetKind(), Version: p.GetVersion(), Server: p.GetServer(),
		})
	}
	return &pulumirpc.GetRequiredPluginsResponse{Plugins: plugins}, nil
}

func (h *host) typecheck(ctx context.Context, tc toolchain.Toolchain, opts toolchain.PythonOptions) error {
	var module string
	switch opts.Typechecker {
	case toolchain.TypeCheckerMypy:
		module = "mypy"
	case toolchain.TypeCheckerPyright:
		module = "pyright"
	default:
		return nil
	}
	cmd, err := tc.ModuleCommand(ctx, module, opts.ProgramDir)
	if err != nil {
		return err
	}
	cmd.Dir = opts.ProgramDir
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s type checking failed: %w", module, err)
	}
	return nil
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	tc, opts, err := h.resolve(ctx, req.GetInfo())
	if err != nil {
		return nil, err
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	if err := h.typecheck(ctx, tc, opts); err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}

	args := []string{h.execPath}
	add := func(k, v string) {
		if v != "" {
			args = append(args, "--"+k, v)
		}
	}
	add("monitor", req.GetMonitorAddress())
	add("engine", h.engine())
	add("project", req.GetProject())
	add("stack", req.GetStack())
	add("pwd", req.GetPwd())
	add("dry_run", fmt.Sprintf("%v", req.GetDryRun()))
	add("parallel", fmt.Sprint(req.GetParallel()))
	add("tracing", h.tracing)
	add("organization", req.GetOrganization())
	if info := req.GetInfo(); info != nil {
		add("root_directory", info.GetRootDirectory())
	}
	program := req.GetProgram()
	if program == "" {
		program = "."
	}
	args = append(args, program)
	args = append(args, req.GetArgs()...)

	configMap := req.GetConfig()
	if configMap == nil {
		configMap = map[string]string{} // "null" would break the SDK's config parsing
	}
	config, err := json.Marshal(configMap)
	if err != nil {
		return nil, fmt.Errorf("serializing configuration: %w", err)
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secretKeysJSON, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, fmt.Errorf("serializing secret configuration keys: %w", err)
	}

	cmd, err := tc.Command(ctx, args...)
	if err != nil {
		return nil, err
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env,
		"PULUMI_CONFIG="+string(config),
		"PULUMI_CONFIG_SECRET_KEYS="+string(secretKeysJSON),
		"PYTHONUNBUFFERED=1",
	)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	logging.V(5).Infof("language host launching process: %s", strings.Join(cmd.Args, " "))

	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if exitErr.ExitCode() == bailExitCode {
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{
				Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exitErr.ExitCode()),
			}, nil
		}
		return &pulumirpc.RunResponse{
			Error: fmt.Sprintf("Problem executing program (could not run language executor): %v", err),
		}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// streamWriter forwards output to an InstallDependencies stream.
type streamWriter struct {
	mu     *sync.Mutex
	send   func(*pulumirpc.InstallDependenciesResponse) error
	stderr bool
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := append([]byte(nil), p...)
	msg := &pulumirpc.InstallDependenciesResponse{Stdout: b}
	if w.stderr {
		msg = &pulumirpc.InstallDependenciesResponse{Stderr: b}
	}
	if err := w.send(msg); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *host) InstallDependencies(req *pulumirpc.InstallDependenciesRequest,
	server grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse],
) error {
	ctx := server.Context()
	tc, opts, err := h.resolve(ctx, req.GetInfo())
	if err != nil {
		return err
	}
	dir := opts.ProgramDir
	if req.GetInfo() == nil && req.GetDirectory() != "" {
		dir = req.GetDirectory()
	}
	var mu sync.Mutex
	stdout := streamWriter{mu: &mu, send: server.Send}
	stderr := streamWriter{mu: &mu, send: server.Send, stderr: true}
	if err := tc.InstallDependencies(ctx, dir, req.GetUseLanguageVersionTools(), true, stdout, stderr); err != nil {
		return err
	}
	return nil
}

func (h *host) RuntimeOptionsPrompts(ctx context.Context,
	req *pulumirpc.RuntimeOptionsRequest,
) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

func (h *host) Template(ctx context.Context, req *pulumirpc.TemplateRequest) (*pulumirpc.TemplateResponse, error) {
	return &pulumirpc.TemplateResponse{}, nil
}

func (h *host) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	tc, opts, err := h.resolve(ctx, req.GetInfo())
	if err != nil {
		return nil, err
	}
	info, err := tc.About(ctx)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.AboutResponse{
		Executable: info.PythonExecutable,
		Version:    info.PythonVersion.String(),
		Metadata: map[string]string{
			"toolchain":  toolchain.Name(opts.Toolchain),
			"virtualenv": opts.Virtualenv,
		},
	}, nil
}

func (h *host) GetProgramDependencies(ctx context.Context,
	req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	tc, _, err := h.resolve(ctx, req.GetInfo())
	if err != nil {
		return nil, err
	}
	deps, err := tc.ListPackages(ctx, req.GetTransitiveDependencies())
	if err != nil {
		return nil, err
	}
	resp := &pulumirpc.GetProgramDependenciesResponse{}
	for _, d := range deps {
		resp.Dependencies = append(resp.Dependencies, &pulumirpc.DependencyInfo{Name: d.Name, Version: d.Version})
	}
	return resp, nil
}

// RunPlugin runs a plugin (e.g. a provider) written in Python: `python <program dir or file> args...`.
func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest,
	server grpc.ServerStreamingServer[pulumirpc.RunPluginResponse],
) error {
	ctx := server.Context()
	tc, opts, err := h.resolve(ctx, req.GetInfo())
	if err != nil {
		return err
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return err
	}
	program := req.GetProgram()
	if program == "" {
		program = opts.ProgramDir
		if ep := req.GetInfo().GetEntryPoint(); ep != "" && ep != "." {
			program = filepath.Join(opts.ProgramDir, ep)
		}
	}
	cmd, err := tc.Command(ctx, append([]string{"-u", program}, req.GetArgs()...)...)
	if err != nil {
		return err
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env, req.GetEnv()...)
	cmd.Dir = req.GetPwd()

	var mu sync.Mutex
	send := func(r *pulumirpc.RunPluginResponse) error {
		mu.Lock()
		defer mu.Unlock()
		return server.Send(r)
	}
	pipe := func(r io.Reader, stderr bool, done chan<- struct{}) {
		defer close(done)
		buf := make([]byte, 32*1024)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				b := append([]byte(nil), buf[:n]...)
				var msg *pulumirpc.RunPluginResponse
				if stderr {
					msg = &pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stderr{Stderr: b}}
				} else {
					msg = &pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stdout{Stdout: b}}
				}
				_ = send(msg)
			}
			if err != nil {
				return
			}
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderrPipe, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	outDone, errDone := make(chan struct{}), make(chan struct{})
	go pipe(stdout, false, outDone)
	go pipe(stderrPipe, true, errDone)
	<-outDone
	<-errDone
	code := 0
	if err := cmd.Wait(); err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			return err
		}
		code = exitErr.ExitCode()
	}
	return send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(code)}})
}

// GenerateProgram turns a PCL program into Python with Pulumi's own program generator
// (pkg/v3/codegen/python): what `pulumi import` and `pulumi convert` print or write.
func (h *host) GenerateProgram(ctx context.Context,
	req *pulumirpc.GenerateProgramRequest,
) (*pulumirpc.GenerateProgramResponse, error) {
	loader, err := schema.NewLoaderClient(req.GetLoaderTarget())
	if err != nil {
		return nil, err
	}
	defer loader.Close()

	parser := hclsyntax.NewParser()
	for path, contents := range req.GetSource() {
		if err := parser.ParseFile(strings.NewReader(contents), path); err != nil {
			return nil, err
		}
		if parser.Diagnostics.HasErrors() {
			return &pulumirpc.GenerateProgramResponse{
				Diagnostics: plugin.HclDiagnosticsToRPCDiagnostics(parser.Diagnostics),
			}, nil
		}
	}
	options := []pcl.BindOption{pcl.PreferOutputVersionedInvokes}
	if !req.GetStrict() {
		options = append(options, pcl.NonStrictBindOptions()...)
	}
	program, diags, err := pcl.BindProgramWithContext(ctx, parser.Files, schema.NewCachedLoader(loader), options...)
	if err != nil {
		return nil, err
	}
	if diags.HasErrors() || program == nil {
		return &pulumirpc.GenerateProgramResponse{Diagnostics: plugin.HclDiagnosticsToRPCDiagnostics(diags)}, nil
	}
	files, genDiags, err := pygen.GenerateProgram(program)
	if err != nil {
		return nil, err
	}
	diags = append(diags, genDiags...)
	return &pulumirpc.GenerateProgramResponse{
		Source:      files,
		Diagnostics: plugin.HclDiagnosticsToRPCDiagnostics(diags),
	}, nil
}
