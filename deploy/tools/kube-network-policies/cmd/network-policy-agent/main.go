// network-policy-agent enforces Kubernetes NetworkPolicies on one node of the local cluster with
// kube-network-policies' controller (sigs.k8s.io/kube-network-policies, the implementation kind
// ships), started the way a host process of a test node can run it: a kubeconfig instead of the
// in-cluster config, the node named by a flag, and no metrics listener (two nodes share the host's
// loopback). NRI stays "on": containerd 1.6 has none, so its plugin finds no socket and exits at
// once, leaving an empty pod map; with NRI off the controller has no map at all and panics on the
// first packet from an address that is no pod's (v0.8.0), such as a kubelet's probe.
//
// The controller judges every packet the kernel queues to its NFQUEUE. Its own nftables rules
// that queue them need the kernel's nft_queue, which these machines lack; node.sh queues the new
// connections into the node's pods with an iptables NFQUEUE rule instead (xt_NFQUEUE is built in).
// The controller's nftables sync then fails and is logged, and changes nothing else.
//
// AdminNetworkPolicies (policy.networking.k8s.io, the cluster administrator's rules, which a
// namespace's NetworkPolicies cannot override) are enforced too: start.sh installs their CRD. They
// are how a cluster blocks traffic that a job's own NetworkPolicy allows. With them v0.8.0 also
// starts a DNS agent (for rules that name domains, not used here) on NFQUEUE queue+1: its nftables
// rules cannot be made here either, and on that error it closes its queue's socket while its
// receive loop goes on, spinning on the closed descriptor (a core each, millions of log lines).
// The agent holds that queue itself first, so the DNS agent fails to bind it and stops at once.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/florianl/go-nfqueue"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
	npaclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
	npainformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	nodeName := flag.String("node-name", "", "the Node this agent enforces policies on (required)")
	queueID := flag.Int("nfqueue-id", 100, "the NFQUEUE number the node's iptables rule queues to")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *nodeName == "" {
		fmt.Fprintln(os.Stderr, "network-policy-agent: --kubeconfig and --node-name are required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *nodeName, *queueID); err != nil {
		fmt.Fprintf(os.Stderr, "network-policy-agent: %v\n", err)
		os.Exit(1)
	}
}

func run(kubeconfig, nodeName string, queueID int) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	held, err := holdQueue(ctx, queueID+1)
	if err != nil {
		return fmt.Errorf("holding NFQUEUE %d from the DNS agent: %w", queueID+1, err)
	}
	defer held.Close()
	policyClient, err := npaclient.NewForConfig(config)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	policyFactory := npainformers.NewSharedInformerFactory(policyClient, 0)
	controller, err := networkpolicy.NewController(client,
		factory.Networking().V1().NetworkPolicies(), factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(), factory.Core().V1().Nodes(), policyClient,
		policyFactory.Policy().V1alpha1().AdminNetworkPolicies(), nil,
		networkpolicy.Config{QueueID: queueID, NodeName: nodeName, AdminNetworkPolicy: true})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	policyFactory.Start(ctx.Done())
	klog.Infof("enforcing NetworkPolicies and AdminNetworkPolicies on node %s from NFQUEUE %d", nodeName, queueID)
	return controller.Run(ctx)
}

// holdQueue binds NFQUEUE `id` (nothing is queued to it; a packet that were would be accepted).
func holdQueue(ctx context.Context, id int) (*nfqueue.Nfqueue, error) {
	queue, err := nfqueue.Open(&nfqueue.Config{NfQueue: uint16(id), MaxPacketLen: 0xFFFF,
		MaxQueueLen: 16, Copymode: nfqueue.NfQnlCopyMeta, WriteTimeout: 100 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	accept := func(a nfqueue.Attribute) int {
		queue.SetVerdict(*a.PacketID, nfqueue.NfAccept) //nolint:errcheck
		return 0
	}
	stop := func(err error) int {
		klog.Infof("NFQUEUE %d held from the DNS agent: %v", id, err)
		return 1
	}
	if err := queue.RegisterWithErrorFunc(ctx, accept, stop); err != nil {
		queue.Close()
		return nil, err
	}
	return queue, nil
}
