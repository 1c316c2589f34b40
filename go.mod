module github.com/yella-go/yella

go 1.26

require github.com/DataDog/sketches-go v1.4.8

require (
	github.com/google/uuid v1.6.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
