// Command go-producer submits one job with the Go SDK (clients/go) and waits
// for its end: go-producer TASK JSON. It prints the job as JSON (id, state,
// finished, result, lastError). Settings from the environment:
// LEASEQUEUE_URL, LEASEQUEUE_QUEUE, LEASEQUEUE_TOKEN.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	leasequeue "leasequeue/clients/go"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: go-producer TASK JSON")
	}
	var payload any
	if err := json.Unmarshal([]byte(os.Args[2]), &payload); err != nil {
		log.Fatalf("JSON: %v", err)
	}
	conn, err := leasequeue.Dial(os.Getenv("LEASEQUEUE_URL"), leasequeue.WithToken(os.Getenv("LEASEQUEUE_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	client := leasequeue.NewClient(conn)
	job, finished, err := client.SubmitAndWait(context.Background(), os.Getenv("LEASEQUEUE_QUEUE"), os.Args[1], payload, nil, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	var result any
	if job.GetResult() != nil {
		result = job.GetResult().AsInterface()
	}
	out, _ := json.Marshal(map[string]any{"id": job.GetId(), "state": job.GetState().String(), "finished": finished, "result": result, "lastError": job.GetLastError()})
	fmt.Println(string(out))
}
