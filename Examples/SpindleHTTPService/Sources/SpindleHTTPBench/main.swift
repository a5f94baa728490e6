import AsyncHTTPClient
import SpindleHTTPServiceKit

print("x")
