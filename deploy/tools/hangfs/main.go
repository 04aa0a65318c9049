// hangfs: a read-only FUSE view of a directory whose reads can be made to hang, as those of a
// network filesystem do when its server stops answering: lookups, stats and opens answer, reads
// of file contents wait. SIGUSR1 makes the reads from then on wait; SIGUSR2 lets every waiting
// read go on; SIGTERM or SIGINT unmounts. It prints "mounted" once the mount is up. The stall
// tests give a job a dataset volume on it (tests/e2e/stall_test.cpp).
//
//	hangfs SOURCE MOUNTPOINT
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// gate holds reads while it is shut.
type gate struct {
	mu   sync.Mutex
	open chan struct{} // closed while reads pass
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default: // shut already
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// pass waits until the gate is open, or the read is interrupted (its process got a signal).
func (g *gate) pass(ctx context.Context) syscall.Errno {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return 0
	case <-ctx.Done():
		return syscall.EINTR
	}
}

var reads = newGate()

// node is a loopback node whose files' reads pass the gate.
type node struct{ *fs.LoopbackNode }

func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{ops.(*fs.LoopbackNode)}
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	handle, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &file{handle}, fuseFlags, 0
}

// file forwards to the loopback file what the kernel asks of an open file, reads past the gate.
type file struct{ inner fs.FileHandle }

func (f *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if errno := reads.pass(ctx); errno != 0 {
		return nil, errno
	}
	return f.inner.(fs.FileReader).Read(ctx, dest, off)
}

func (f *file) Release(ctx context.Context) syscall.Errno {
	return f.inner.(fs.FileReleaser).Release(ctx)
}

func (f *file) Flush(ctx context.Context) syscall.Errno {
	return f.inner.(fs.FileFlusher).Flush(ctx)
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.inner.(fs.FileGetattrer).Getattr(ctx, out)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.inner.(fs.FileLseeker).Lseek(ctx, off, whence)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: hangfs SOURCE MOUNTPOINT")
		os.Exit(2)
	}
	source, mountpoint := os.Args[1], os.Args[2]
	loopback, err := fs.NewLoopbackRoot(source)
	if err != nil {
		log.Fatalf("hangfs: %s: %v", source, err)
	}
	root := &node{loopback.(*fs.LoopbackNode)}
	loopback.(*fs.LoopbackNode).RootData.RootNode = root
	server, err := fs.Mount(mountpoint, root, &fs.Options{MountOptions: fuse.MountOptions{
		AllowOther:  true, // the pods' containers run as other users
		DirectMount: true, // root: mount(2) itself, no fusermount
		FsName:      source,
		Name:        "hangfs",
	}})
	if err != nil {
		log.Fatalf("hangfs: mount at %s: %v", mountpoint, err)
	}
	fmt.Println("mounted")
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for s := range signals {
			switch s {
			case syscall.SIGUSR1:
				reads.shut()
				log.Print("hangfs: reads wait")
			case syscall.SIGUSR2:
				reads.release()
				log.Print("hangfs: reads go on")
			default:
				reads.release()
				if err := server.Unmount(); err != nil {
					log.Printf("hangfs: unmount: %v", err)
				}
			}
		}
	}()
	server.Wait()
}
