"""The gRPC edge of netpeerd: conversion, error mapping, auth, serving."""
