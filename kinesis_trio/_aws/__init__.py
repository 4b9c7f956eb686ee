"""The AWS client: SigV4 and credentials (botocore), the Kinesis JSON 1.1 calls, and
HTTP/1.1 framed by h11.
"""
