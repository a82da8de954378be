// Package plugin runs a vkprovider provider plugin written in Go: the handshake line, the
// standard gRPC health service, the Provider service, graceful stop on SIGTERM, and stopping
// when the host process dies. See docs/plugin-guide.md §3 for the protocol.
package plugin

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	pb "github.com/vkprovider/vkprovider/sdk/go/vkproviderv1"
)

// AddressEnv is the listen address the host suggests (a unix socket in a private directory).
const AddressEnv = "VKPROVIDER_PLUGIN_ADDRESS"

// Provider is the unary part of the vkprovider.v1.Provider service; Watch, Logs, Usage and
// Endpoints are optional and answered UNIMPLEMENTED (declare watch, logs, metrics and endpoints
// false in GetInfo).
type Provider interface {
	GetInfo(context.Context, *pb.GetInfoRequest) (*pb.GetInfoResponse, error)
	Probe(context.Context, *pb.ProbeRequest) (*pb.ProbeResponse, error)
	Offers(context.Context, *pb.OffersRequest) (*pb.OffersResponse, error)
	Deploy(context.Context, *pb.DeployRequest) (*pb.DeployResponse, error)
	Get(context.Context, *pb.GetRequest) (*pb.GetResponse, error)
	List(context.Context, *pb.ListRequest) (*pb.ListResponse, error)
	Delete(context.Context, *pb.DeleteRequest) (*pb.DeleteResponse, error)
}

const serviceName = "vkprovider.v1.Provider"

func unary[Req any, PReq interface {
	*Req
	proto.Message
}, Resp proto.Message](name string, call func(Provider, context.Context, PReq) (Resp, error)) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		in := PReq(new(Req))
		if err := dec(in); err != nil {
			return nil, err
		}
		handler := func(ctx context.Context, req any) (any, error) { return call(srv.(Provider), ctx, req.(PReq)) }
		if ic == nil {
			return handler(ctx, in)
		}
		return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + serviceName + "/" + name}, handler)
	}}
}

// ServiceDesc binds Provider to the service in provider.proto (no protoc-gen-go-grpc needed).
var ServiceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*Provider)(nil),
	Methods: []grpc.MethodDesc{
		unary("GetInfo", Provider.GetInfo),
		unary("Probe", Provider.Probe),
		unary("Offers", Provider.Offers),
		unary("Deploy", Provider.Deploy),
		unary("Get", Provider.Get),
		unary("List", Provider.List),
		unary("Delete", Provider.Delete),
	},
	Metadata: "vkprovider/v1/provider.proto",
}

func listen() (net.Listener, string, error) {
	address := os.Getenv(AddressEnv)
	if address == "" {
		address = "127.0.0.1:0"
	}
	if path, ok := strings.CutPrefix(address, "unix:"); ok {
		path = strings.TrimPrefix(path, "//")
		lis, err := net.Listen("unix", path)
		return lis, "unix:" + path, err
	}
	lis, err := net.Listen("tcp", address)
	if err != nil {
		return nil, "", err
	}
	return lis, lis.Addr().String(), nil
}

// Serve runs p until SIGTERM/SIGINT (or the host's death), then stops gracefully: health
// NOT_SERVING, in-flight calls drain for up to grace, then the server stops.
func Serve(p Provider, grace time.Duration) error {
	lis, address, err := listen()
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	server := grpc.NewServer()
	server.RegisterService(&ServiceDesc, p)
	healthServer := health.NewServer()
	healthpb.RegisterHealthServer(server, healthServer)
	healthServer.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthServer.SetServingStatus(serviceName, healthpb.HealthCheckResponse_SERVING)

	served := make(chan error, 1)
	go func() { served <- server.Serve(lis) }()
	fmt.Printf("vkprovider-plugin|1|%s\n", address) // the handshake line: the host dials this

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	orphaned := make(chan struct{})
	if os.Getenv(AddressEnv) != "" { // launched by a host: stop if it dies without stopping us
		go func(parent int) {
			for os.Getppid() == parent {
				time.Sleep(time.Second)
			}
			close(orphaned)
		}(os.Getppid())
	}
	select {
	case err := <-served:
		return err
	case <-stop:
	case <-orphaned:
	}
	healthServer.Shutdown()
	done := make(chan struct{})
	go func() { server.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		server.Stop()
	}
	return nil
}
