// pulumi-language-nodejs: a compact Node.js language host for the Pulumi CLI.
//
// Written for netpeer because the upstream host module
// (github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3) is not served by the Go module
// proxy reachable from our machines. It is built by scripts/install-pulumi-languages.sh against the same
// github.com/pulumi/pulumi release as the CLI.
//
// Programs run through the Node.js SDK's own runner, `node [nodeargs] <@pulumi/pulumi>/cmd/run <flags>
// <program> [args]`, exactly as the SDK expects it (TypeScript through ts-node when the `typescript`
// runtime option is true, the default). The runner is looked up in node_modules from the program
// directory upwards; when the program has none, the shared node_modules installed at setup time is used
// (NETPEER_PULUMI_NODE_MODULES, default: ../node_modules next to this binary) and put on NODE_PATH. For
// TypeScript programs without node_modules of their own, the host also passes ts-node path mappings to
// that directory so the type checker finds @pulumi/pulumi and the generated SDKs too.
//
// Runtime options read from Pulumi.yaml: typescript (bool), nodeargs (string), tsconfig (string).
// GeneratePackage runs Pulumi's TypeScript code generator (pkg/v3/codegen/nodejs), so
// `pulumi package gen-sdk --language nodejs` works, and GenerateProgram its program generator (the code
// `pulumi import` prints). Not implemented: plugins and policy packs written in Node.js (RunPlugin),
// GenerateProject, Pack, Link.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	hclsyntax "github.com/pulumi/pulumi/pkg/v3/codegen/hcl2/syntax"
	"github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	"github.com/pulumi/pulumi/pkg/v3/codegen/pcl"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/cmdutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/logging"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

const (
	runnerPath = "@pulumi/pulumi/cmd/run"
	// Exit code of the SDK's runner after it already showed the user an actionable message.
	bailExitCode = 32
	// Environment variable naming the node_modules installed at setup time.
	sharedModulesEnv = "NETPEER_PULUMI_NODE_MODULES"
)

func main() {
	var tracing string
	flag.StringVar(&tracing, "tracing", "", "Emit tracing to a Zipkin-compatible tracing endpoint")
	if flag.Lookup("logtostderr") == nil {
		flag.Bool("logtostderr", false, "Log to stderr instead of to files")
	}
	if flag.Lookup("v") == nil {
		flag.Int("v", 0, "Enable verbose logging at the given level")
	}
	if flag.Lookup("logflow") == nil {
		flag.Bool("logflow", false, "Flow log settings to child processes")
	}
	// Accepted for compatibility with older engines; options arrive in ProgramInfo nowadays.
	flag.Bool("typescript", true, "Use ts-node at runtime (legacy; see the runtime option)")
	flag.String("root", "", "Project root path (legacy)")
	flag.String("tsconfig", "", "Path to tsconfig.json (legacy; see the runtime option)")
	flag.String("nodeargs", "", "Arguments for node (legacy; see the runtime option)")
	flag.String("packagemanager", "", "Package manager (legacy; ignored)")
	flag.Parse()

	logging.InitLogging(false, 0, false)
	cmdutil.InitTracing("pulumi-language-nodejs", "pulumi-language-nodejs", tracing)

	var engineAddress string
	if args := flag.Args(); len(args) > 0 {
		engineAddress = args[0]
	}
	h := &host{engineAddress: engineAddress, tracing: tracing, shared: sharedModules()}
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

// sharedModules is the node_modules directory installed at setup time, or "" when there is none.
func sharedModules() string {
	dir := os.Getenv(sharedModulesEnv)
	if dir == "" {
		if self, err := os.Executable(); err == nil {
			dir = filepath.Join(filepath.Dir(self), "..", "node_modules")
		}
	}
	if dir == "" {
		return ""
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, runnerPath, "index.js")); err != nil {
		return ""
	}
	return dir
}

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	tracing string
	shared  string

	mu            sync.Mutex
	engineAddress string
}

func (h *host) engine() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.engineAddress
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

// options are the runtime options of Pulumi.yaml that this host understands.
type options struct {
	typescript bool
	nodeargs   []string
	tsconfig   string
}

func parseOptions(info *pulumirpc.ProgramInfo) (options, error) {
	opts := options{typescript: true}
	for key, v := range info.GetOptions().GetFields() {
		if v == nil || v.AsInterface() == nil {
			continue
		}
		switch key {
		case "typescript":
			b, ok := v.AsInterface().(bool)
			if !ok {
				return opts, fmt.Errorf("runtime option typescript must be true or false, got %v", v.AsInterface())
			}
			opts.typescript = b
		case "nodeargs":
			s, ok := v.AsInterface().(string)
			if !ok {
				return opts, fmt.Errorf("runtime option nodeargs must be a string, got %v", v.AsInterface())
			}
			opts.nodeargs = strings.Fields(s)
		case "tsconfig":
			s, ok := v.AsInterface().(string)
			if !ok {
				return opts, fmt.Errorf("runtime option tsconfig must be a string, got %v", v.AsInterface())
			}
			opts.tsconfig = s
		}
	}
	return opts, nil
}

func programDir(info *pulumirpc.ProgramInfo, pwd string) string {
	if d := info.GetProgramDirectory(); d != "" {
		return d
	}
	if pwd != "" {
		return pwd
	}
	cwd, _ := os.Getwd()
	return cwd
}

// findUp returns the first dir/node_modules/rel (dir = start and its parents) that exists, or "".
func findUp(start, rel string) string {
	dir, err := filepath.Abs(start)
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, "node_modules", rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	opts, err := parseOptions(req.GetInfo())
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return &pulumirpc.RunResponse{Error: "could not find node on the PATH: install Node.js 20 or newer"}, nil
	}
	dir := programDir(req.GetInfo(), req.GetPwd())

	env := os.Environ()
	runner := findUp(dir, runnerPath)
	if runner == "" {
		if h.shared == "" {
			return &pulumirpc.RunResponse{Error: fmt.Sprintf(
				"could not find %s from %s, and no shared node_modules is installed "+
					"(run scripts/install-pulumi-languages.sh, or npm install in the program directory)",
				runnerPath, dir)}, nil
		}
		runner = filepath.Join(h.shared, runnerPath)
		env = h.sharedModuleEnv(env, opts)
	}

	args := append([]string{}, opts.nodeargs...)
	args = append(args, runner)
	add := func(k, v string) {
		if v != "" {
			args = append(args, "--"+k, v)
		}
	}
	add("monitor", req.GetMonitorAddress())
	add("engine", h.engine())
	add("organization", req.GetOrganization())
	add("project", req.GetProject())
	add("stack", req.GetStack())
	add("pwd", req.GetPwd())
	if req.GetDryRun() {
		args = append(args, "--dry-run")
	}
	if req.GetQueryMode() {
		args = append(args, "--query-mode")
	}
	if p := req.GetParallel(); p > 0 {
		add("parallel", fmt.Sprint(p))
	}
	add("tracing", h.tracing)
	add("root-directory", req.GetInfo().GetRootDirectory())
	program := req.GetProgram()
	if program == "" {
		program = "."
	}
	args = append(args, program)
	args = append(args, req.GetArgs()...)

	configMap := req.GetConfig()
	if configMap == nil {
		configMap = map[string]string{}
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
	env = append(env,
		"PULUMI_CONFIG="+string(config),
		"PULUMI_CONFIG_SECRET_KEYS="+string(secretKeysJSON),
		fmt.Sprintf("PULUMI_NODEJS_TYPESCRIPT=%v", opts.typescript),
	)
	if opts.tsconfig != "" {
		env = append(env, "PULUMI_NODEJS_TSCONFIG_PATH="+opts.tsconfig)
	}

	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	logging.V(5).Infof("language host launching process: %s %s", node, strings.Join(args, " "))
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
			Error: fmt.Sprintf("Problem executing program (could not run node): %v", err),
		}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// sharedModuleEnv lets a program without node_modules of its own use the shared one: NODE_PATH for
// require(), and for TypeScript a baseUrl/paths mapping so that ts-node's type checker resolves the same
// packages (ts-node merges TS_NODE_COMPILER_OPTIONS into the options the SDK's runner passes).
func (h *host) sharedModuleEnv(env []string, opts options) []string {
	nodePath := h.shared
	if old := os.Getenv("NODE_PATH"); old != "" {
		nodePath += string(os.PathListSeparator) + old
	}
	env = append(env, "NODE_PATH="+nodePath)
	if opts.typescript && os.Getenv("TS_NODE_COMPILER_OPTIONS") == "" {
		mapping, _ := json.Marshal(map[string]any{
			"baseUrl":   h.shared,
			"paths":     map[string][]string{"*": {"*", "@types/*"}},
			"typeRoots": []string{filepath.Join(h.shared, "@types")},
		})
		env = append(env, "TS_NODE_COMPILER_OPTIONS="+string(mapping))
	}
	return env
}

// packageJSON holds the parts of a package.json this host reads.
type packageJSON struct {
	Name         string            `json:"name"`
	Version      string            `json:"version"`
	Dependencies map[string]string `json:"dependencies"`
	Pulumi       *struct {
		Resource bool   `json:"resource"`
		Name     string `json:"name"`
		Version  string `json:"version"`
		Server   string `json:"server"`
	} `json:"pulumi"`
}

func readPackageJSON(path string) (*packageJSON, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p packageJSON
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &p, nil
}

// installedPackages lists the packages directly inside a node_modules directory (scoped ones included).
func installedPackages(nodeModules string) []string {
	var dirs []string
	entries, err := os.ReadDir(nodeModules)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(nodeModules, name)
		if strings.HasPrefix(name, "@") {
			scoped, err := os.ReadDir(p)
			if err != nil {
				continue
			}
			for _, s := range scoped {
				dirs = append(dirs, filepath.Join(p, s.Name()))
			}
			continue
		}
		dirs = append(dirs, p)
	}
	sort.Strings(dirs)
	return dirs
}

// moduleDirs is the node_modules a program sees: its own (from its directory upwards) when they hold
// @pulumi/pulumi, else the shared one; the same choice Run makes.
func (h *host) moduleDirs(dir string) []string {
	var out []string
	if abs, err := filepath.Abs(dir); err == nil && findUp(abs, runnerPath) != "" {
		for d := abs; ; d = filepath.Dir(d) {
			if st, err := os.Stat(filepath.Join(d, "node_modules")); err == nil && st.IsDir() {
				out = append(out, filepath.Join(d, "node_modules"))
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if len(out) == 0 && h.shared != "" {
		out = append(out, h.shared)
	}
	return out
}

func (h *host) GetRequiredPackages(ctx context.Context,
	req *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	seen := map[string]bool{}
	var pkgs []*pulumirpc.PackageDependency
	for _, nm := range h.moduleDirs(programDir(req.GetInfo(), "")) {
		for _, pdir := range installedPackages(nm) {
			dep, err := pluginOf(pdir)
			if err != nil {
				return nil, err
			}
			if dep == nil || seen[dep.Name+"@"+dep.Version] {
				continue
			}
			seen[dep.Name+"@"+dep.Version] = true
			pkgs = append(pkgs, dep)
		}
	}
	return &pulumirpc.GetRequiredPackagesResponse{Packages: pkgs}, nil
}

// pluginOf reads the resource plugin a package needs from its pulumi-plugin.json or package.json.
func pluginOf(pdir string) (*pulumirpc.PackageDependency, error) {
	if b, err := os.ReadFile(filepath.Join(pdir, "pulumi-plugin.json")); err == nil {
		var p plugin.PulumiPluginJSON
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(pdir, "pulumi-plugin.json"), err)
		}
		if !p.Resource || p.Parameterization != nil || p.ExtensionParameterization != nil {
			return nil, nil
		}
		return dependency(p.Name, p.Version, p.Server, filepath.Base(pdir)), nil
	}
	pj, err := readPackageJSON(filepath.Join(pdir, "package.json"))
	if err != nil || pj.Pulumi == nil || !pj.Pulumi.Resource {
		return nil, nil //nolint:nilerr // a package without a readable package.json is not a plugin source
	}
	v := pj.Pulumi.Version
	if v == "" {
		v = pj.Version
	}
	name := pj.Pulumi.Name
	if name == "" {
		name = strings.TrimPrefix(strings.TrimPrefix(pj.Name, "@pulumi/"), "@")
	}
	return dependency(name, v, pj.Pulumi.Server, name), nil
}

func dependency(name, v, server, fallbackName string) *pulumirpc.PackageDependency {
	if name == "" {
		name = fallbackName
	}
	if v != "" && !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	return &pulumirpc.PackageDependency{Name: name, Kind: "resource", Version: v, Server: server}
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
		plugins = append(plugins, &pulumirpc.PluginDependency{
			Name: p.GetName(), Kind: p.GetKind(), Version: p.GetVersion(), Server: p.GetServer(),
		})
	}
	return &pulumirpc.GetRequiredPluginsResponse{Plugins: plugins}, nil
}

func (h *host) GetProgramDependencies(ctx context.Context,
	req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	dir := programDir(req.GetInfo(), "")
	resp := &pulumirpc.GetProgramDependenciesResponse{}
	var wanted map[string]string
	if pj, err := readPackageJSON(filepath.Join(dir, "package.json")); err == nil {
		wanted = pj.Dependencies
	}
	dirs := h.moduleDirs(dir)
	if len(dirs) == 0 {
		return resp, nil
	}
	if len(wanted) == 0 {
		// No dependencies of its own listed (e.g. a program on the shared node_modules): the packages that
		// node_modules was installed for.
		if pj, err := readPackageJSON(filepath.Join(filepath.Dir(dirs[0]), "package.json")); err == nil {
			wanted = pj.Dependencies
		}
	}
	for _, pdir := range installedPackages(dirs[0]) {
		pj, err := readPackageJSON(filepath.Join(pdir, "package.json"))
		if err != nil || pj.Name == "" {
			continue
		}
		_, direct := wanted[pj.Name]
		if !req.GetTransitiveDependencies() && !direct && pj.Pulumi == nil {
			continue
		}
		resp.Dependencies = append(resp.Dependencies, &pulumirpc.DependencyInfo{Name: pj.Name, Version: pj.Version})
	}
	return resp, nil
}

func (h *host) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("could not find node on the PATH")
	}
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("node --version: %w", err)
	}
	meta := map[string]string{}
	if h.shared != "" {
		meta["sharedNodeModules"] = h.shared
	}
	return &pulumirpc.AboutResponse{
		Executable: node, Version: strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), Metadata: meta,
	}, nil
}

func (h *host) RuntimeOptionsPrompts(ctx context.Context,
	req *pulumirpc.RuntimeOptionsRequest,
) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

func (h *host) Template(ctx context.Context, req *pulumirpc.TemplateRequest) (*pulumirpc.TemplateResponse, error) {
	return &pulumirpc.TemplateResponse{}, nil
}

// InstallDependencies runs `npm install` for a program that has a package.json (the usual `pulumi install`
// behaviour); programs that use the shared node_modules have nothing to install.
func (h *host) InstallDependencies(req *pulumirpc.InstallDependenciesRequest,
	server grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse],
) error {
	dir := programDir(req.GetInfo(), "")
	if req.GetInfo() == nil && req.GetDirectory() != "" {
		dir = req.GetDirectory()
	}
	send := func(stderr bool, b []byte) {
		msg := &pulumirpc.InstallDependenciesResponse{Stdout: b}
		if stderr {
			msg = &pulumirpc.InstallDependenciesResponse{Stderr: b}
		}
		_ = server.Send(msg)
	}
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		send(false, []byte("no package.json: nothing to install\n"))
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return errors.New("could not find npm on the PATH")
	}
	cmd := exec.CommandContext(server.Context(), npm, "install", "--no-audit", "--no-fund")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		send(err != nil, append(sc.Bytes(), '\n'))
	}
	if err != nil {
		return fmt.Errorf("npm install in %s: %w", dir, err)
	}
	return nil
}

// GeneratePackage generates a TypeScript SDK with Pulumi's code generator.
func (h *host) GeneratePackage(ctx context.Context,
	req *pulumirpc.GeneratePackageRequest,
) (*pulumirpc.GeneratePackageResponse, error) {
	if req.GetLoaderTarget() == "" {
		return nil, status.Error(codes.InvalidArgument, "no schema loader address in the request")
	}
	loader, err := schema.NewLoaderClient(req.GetLoaderTarget())
	if err != nil {
		return nil, err
	}
	defer loader.Close()

	var spec schema.PackageSpec
	if err := json.Unmarshal([]byte(req.GetSchema()), &spec); err != nil {
		return nil, fmt.Errorf("parsing the schema: %w", err)
	}
	pkg, diags, err := schema.BindSpec(spec, loader, schema.ValidationOptions{AllowDanglingReferences: true})
	if err != nil {
		return nil, err
	}
	rpcDiags := plugin.HclDiagnosticsToRPCDiagnostics(diags)
	if diags.HasErrors() {
		return &pulumirpc.GeneratePackageResponse{Diagnostics: rpcDiags}, nil
	}
	files, err := nodejs.GeneratePackage("pulumi-language-nodejs", pkg, req.GetExtraFiles(),
		req.GetLocalDependencies(), req.GetLocal(), loader)
	if err != nil {
		return nil, err
	}
	for name, data := range files {
		path := filepath.Join(req.GetDirectory(), filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, err
		}
	}
	return &pulumirpc.GeneratePackageResponse{Diagnostics: rpcDiags}, nil
}

// GenerateProgram turns a PCL program into TypeScript with Pulumi's own program generator
// (pkg/v3/codegen/nodejs): what `pulumi import` prints or writes.
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
	files, genDiags, err := nodejs.GenerateProgram(program)
	if err != nil {
		return nil, err
	}
	diags = append(diags, genDiags...)
	return &pulumirpc.GenerateProgramResponse{
		Source:      files,
		Diagnostics: plugin.HclDiagnosticsToRPCDiagnostics(diags),
	}, nil
}
