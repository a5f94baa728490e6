import SpindleHTTPServiceKit
import AsyncHTTPClient
print("x")
