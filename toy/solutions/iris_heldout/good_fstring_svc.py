import os

import numpy as np
import pandas as pd
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

root = os.environ.get("DATA_DIR", ".")
train = pd.read_csv(f"{root}/train.csv")
test = pd.read_csv(f"{root}/test.csv")
X = train.drop(columns=["id", "species"]).to_numpy()
y = train["species"].to_numpy()
scaler = StandardScaler().fit(X)
model = SVC(C=3.0, probability=True, random_state=0)
model.fit(scaler.transform(X), y)
P = model.predict_proba(scaler.transform(test.drop(columns=["id"]).to_numpy()))
out = pd.DataFrame(P, columns=model.classes_)
out.insert(0, "id", test["id"].values)
out.to_csv(os.environ["SUBMISSION_PATH"], index=False)
