// Command memory is the minimal Go plugin on the starter: the contract suite's file-backed
// "memory cloud" (tests/contract/harness_memory.py) served out of process. Deployments are
// JSON files created with link(2), so concurrent first deploys of one UID make one deployment;
// the suite's knobs are files in <state_dir>/control.
//
//	memory --config settings.json --name NAME
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/vkprovider/vkprovider/sdk/go/plugin"
	pb "github.com/vkprovider/vkprovider/sdk/go/vkproviderv1"
)

const labelNode = "vkprovider.io/node-name"

type settings struct {
	StateDir string `json:"state_dir"`
	Capacity int    `json:"capacity"`
}

// status is DeploymentStatus as the Python harness stores it (pydantic JSON).
type status struct {
	UID        string `json:"uid"`
	Phase      string `json:"phase"`
	Ready      bool   `json:"ready"`
	NodeName   string `json:"node_name"`
	ProviderID string `json:"provider_id"`
	OfferID    string `json:"offer_id"`
	Reason     string `json:"reason"`
}

type record struct {
	Labels map[string]string `json:"labels"`
	Status status            `json:"status"`
}

var phases = map[string]pb.Phase{
	"Pending": pb.Phase_PHASE_PENDING, "Running": pb.Phase_PHASE_RUNNING, "Succeeded": pb.Phase_PHASE_SUCCEEDED,
	"Failed": pb.Phase_PHASE_FAILED, "Unknown": pb.Phase_PHASE_UNKNOWN,
}

type memory struct {
	name     string
	settings settings
	dir      string
	control  string
}

func token() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// knobs applies the suite's controls for op: a delay (counted, cancellable), then a one-shot failure.
func (m *memory) knobs(ctx context.Context, op string) error {
	var delay struct{ Seconds float64 }
	if data, err := os.ReadFile(filepath.Join(m.control, "delay-"+op)); err == nil && json.Unmarshal(data, &delay) == nil && delay.Seconds > 0 {
		_ = os.WriteFile(filepath.Join(m.control, "started-"+op+"."+token()), nil, 0o644)
		select {
		case <-time.After(time.Duration(delay.Seconds * float64(time.Second))):
		case <-ctx.Done():
			_ = os.WriteFile(filepath.Join(m.control, "cancelled-"+op+"."+token()), nil, 0o644)
			return plugin.Error(plugin.Transient, "cancelled")
		}
	}
	claimed := filepath.Join(m.control, "."+op+"."+token())
	if os.Rename(filepath.Join(m.control, "fail-"+op), claimed) != nil {
		return nil
	}
	defer os.Remove(claimed)
	var fail struct {
		Code       string   `json:"code"`
		Message    string   `json:"message"`
		RetryAfter *float64 `json:"retry_after"`
	}
	data, err := os.ReadFile(claimed)
	if err != nil || json.Unmarshal(data, &fail) != nil {
		return plugin.Error(plugin.Transient, "unreadable failure knob")
	}
	if fail.RetryAfter != nil {
		return plugin.TransientAfter(fail.Message, *fail.RetryAfter)
	}
	return plugin.Error(plugin.Code(fail.Code), fail.Message)
}

func (m *memory) read(uid string) (*record, error) {
	data, err := os.ReadFile(filepath.Join(m.dir, uid+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, plugin.Error(plugin.Transient, err.Error())
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, plugin.Error(plugin.Transient, "corrupt record "+uid)
	}
	return &r, nil
}

func (m *memory) all() []record {
	paths, _ := filepath.Glob(filepath.Join(m.dir, "*.json"))
	sort.Strings(paths)
	var out []record
	for _, p := range paths {
		var r record
		if data, err := os.ReadFile(p); err == nil && json.Unmarshal(data, &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

func (r *record) proto() *pb.DeploymentStatus {
	s := r.Status
	return &pb.DeploymentStatus{
		Uid: s.UID, Phase: phases[s.Phase], Ready: s.Ready, NodeName: s.NodeName,
		ProviderId: s.ProviderID, OfferId: s.OfferID, Reason: s.Reason,
	}
}

func (m *memory) GetInfo(context.Context, *pb.GetInfoRequest) (*pb.GetInfoResponse, error) {
	return &pb.GetInfoResponse{Info: &pb.ProviderInfo{Name: m.name, Adapter: "go-memory", Version: "1", Capabilities: &pb.Capabilities{}}}, nil
}

func (m *memory) Probe(ctx context.Context, _ *pb.ProbeRequest) (*pb.ProbeResponse, error) {
	return &pb.ProbeResponse{}, m.knobs(ctx, "probe")
}

func (m *memory) Offers(ctx context.Context, _ *pb.OffersRequest) (*pb.OffersResponse, error) {
	if err := m.knobs(ctx, "offers"); err != nil {
		return nil, err
	}
	free := max(m.settings.Capacity-len(m.all()), 0)
	offer := &pb.Offer{Provider: m.name, OfferId: "mem-a100", GpuType: "A100-SXM4-80GB", GpuCount: 1, GpuMemoryGb: 80, PricePerHour: 1.5, Capacity: uint32(free)}
	return &pb.OffersResponse{Offers: []*pb.Offer{offer}}, nil
}

func (m *memory) Deploy(ctx context.Context, in *pb.DeployRequest) (*pb.DeployResponse, error) {
	if err := m.knobs(ctx, "deploy"); err != nil {
		return nil, err
	}
	req := in.GetRequest()
	if len(req.GetContainers()) == 0 {
		return nil, plugin.Error(plugin.InvalidRequest, "a deployment needs at least one container")
	}
	if existing, err := m.read(req.GetUid()); err != nil || existing != nil {
		if err != nil {
			return nil, err
		}
		return &pb.DeployResponse{Status: existing.proto()}, nil
	}
	if len(m.all()) >= m.settings.Capacity {
		return nil, plugin.Error(plugin.NoCapacity, fmt.Sprintf("all %d slots are taken", m.settings.Capacity))
	}
	labels := map[string]string{}
	for k, v := range req.GetLabels() {
		labels[k] = v
	}
	labels[labelNode] = req.GetNodeName() // the pod identity tags (DeploymentRequest.tags())
	labels["vkprovider.io/pod-uid"] = req.GetUid()
	labels["vkprovider.io/pod-namespace"] = req.GetNamespace()
	labels["vkprovider.io/pod-name"] = req.GetName()
	offer := req.GetOfferId()
	if offer == "" {
		offer = "mem-a100"
	}
	r := record{Labels: labels, Status: status{UID: req.GetUid(), Phase: "Pending", NodeName: req.GetNodeName(), ProviderID: "mem-" + token()[:12], OfferID: offer, Reason: "Provisioning"}}
	data, _ := json.Marshal(r)
	tmp := filepath.Join(m.dir, "."+req.GetUid()+"."+token())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return nil, plugin.Error(plugin.Transient, err.Error())
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, filepath.Join(m.dir, req.GetUid()+".json")); err != nil { // exists: a concurrent deploy won
		existing, rerr := m.read(req.GetUid())
		if rerr != nil || existing == nil {
			return nil, plugin.Error(plugin.Transient, "create raced a delete; retry")
		}
		return &pb.DeployResponse{Status: existing.proto()}, nil
	}
	return &pb.DeployResponse{Status: r.proto()}, nil
}

func (m *memory) Get(ctx context.Context, in *pb.GetRequest) (*pb.GetResponse, error) {
	if err := m.knobs(ctx, "get"); err != nil {
		return nil, err
	}
	r, err := m.read(in.GetUid())
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, plugin.Error(plugin.NotFound, "no deployment for pod "+in.GetUid())
	}
	return &pb.GetResponse{Status: r.proto()}, nil
}

func (m *memory) List(ctx context.Context, in *pb.ListRequest) (*pb.ListResponse, error) {
	if err := m.knobs(ctx, "list"); err != nil {
		return nil, err
	}
	out := &pb.ListResponse{}
	for _, r := range m.all() {
		if r.Labels[labelNode] == in.GetNodeName() {
			out.Statuses = append(out.Statuses, r.proto())
		}
	}
	return out, nil
}

func (m *memory) Delete(ctx context.Context, in *pb.DeleteRequest) (*pb.DeleteResponse, error) {
	if err := m.knobs(ctx, "delete"); err != nil {
		return nil, err
	}
	err := os.Remove(filepath.Join(m.dir, in.GetUid()+".json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, plugin.Error(plugin.Transient, err.Error())
	}
	// Removed (or never there): gone at once, so the host needs no Get to confirm it stopped.
	return &pb.DeleteResponse{Gone: true}, nil
}

func main() {
	config := flag.String("config", "", "settings JSON: {\"state_dir\": ...}")
	name := flag.String("name", "go-memory", "provider instance name")
	flag.Parse()
	s := settings{Capacity: 1000}
	data, err := os.ReadFile(*config)
	if err == nil {
		err = json.Unmarshal(data, &s)
	}
	if err != nil || s.StateDir == "" {
		fmt.Fprintf(os.Stderr, "memory: --config %q: need a JSON object with state_dir (%v)\n", *config, err)
		os.Exit(2)
	}
	m := &memory{name: *name, settings: s, dir: filepath.Join(s.StateDir, "deployments"), control: filepath.Join(s.StateDir, "control")}
	for _, d := range []string{m.dir, m.control} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "memory:", err)
			os.Exit(1)
		}
	}
	if err := plugin.Serve(m, 5*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "memory:", err)
		os.Exit(1)
	}
}
